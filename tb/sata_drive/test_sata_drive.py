"""The SATA drive top (``rtl/sata/drive.py``): it composes, so the test is that it builds whole and
shows the ports it promises -- the transceiver's, the SATA side's, and the FTL core's firmware ports
under their own names, the core's stream front end taken by the command layer."""

from amaranth.back import rtlil

from rtl.sata.drive import SATA_PORTS, SataDrive


def test_the_drive_builds_with_the_core_and_its_ports():
    drive = SataDrive(profile="small", channels=1, ways=2)
    assert drive.ata.block_bytes == drive.core.profile.page_data == 2048 and drive.ata.sector_bytes == 512
    assert drive.ata.max_sectors == drive.core.limits.max_transfer * 4 - 3
    ports = set(drive.signature.members)
    core_ports = set(drive.core.signature.members)
    assert core_ports - {"stream_cmd", "stream_cpl"} <= ports and not {"stream_cmd", "stream_cpl"} & ports
    assert set(SATA_PORTS) <= ports
    text = rtlil.convert(drive)
    for name in ("sata_trx__tx_data", "sata_trx__rx_data", "sata_staging_base", "capacity", "mem__adr"):
        assert f"\\{name}" in text, name


def test_the_drive_can_expose_the_block_as_the_sector():
    drive = SataDrive(profile="small", channels=1, ways=2, sector_bytes=None)
    assert drive.ata.sector_bytes == drive.ata.block_bytes == 2048
