"""firmware/nvme.c's host build: what it shares with the spec, checked without a simulation.

The admin path itself runs against the gateware in tb/nvme_controller (every test, beside the Python
model); here the tables the C takes from the generated header are held to the Python they mirror.
"""

from atomflash import spec
from tb.firmware_nvme import cnvme


def test_status_of_is_the_spec_mapping():
    lib = cnvme.library()
    for s in spec.Status:
        sct, sc = spec.nvme_status_of(s)
        assert lib.af_nvme_status_of(int(s)) == int(sct) << 8 | int(sc), s.name


def test_identity_constants_are_the_reference_strings():
    words = spec.NVME_IDENT.as_dict()
    mn = b"".join(words[f"MN{i}"].to_bytes(4, "little") for i in range(10))
    fr = b"".join(words[f"FR{i}"].to_bytes(4, "little") for i in range(2))
    assert mn.decode().rstrip() == spec.NVME_MODEL_NUMBER and fr.decode().rstrip() == spec.NVME_FIRMWARE_REVISION
