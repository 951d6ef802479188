"""``python -m sim.campaign`` (``make campaign``, ``campaign-mlc``, ``campaign-long``; also
``python sim/campaign``): the command line, :func:`sim.campaign.cli.main`."""

import sys
from pathlib import Path

if __name__ == "__main__":
    root = Path(__file__).resolve().parents[2]
    sys.path[:0] = [str(root), str(root / "host")]   # run as a folder or without the package installed
    from sim.campaign.cli import main

    sys.exit(main())
