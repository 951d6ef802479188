# Repository-root conftest: makes `tb.common` importable from every test.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
