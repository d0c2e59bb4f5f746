import sys
from pathlib import Path

# The helpers beside the tests (local_server.py) are imported by name; the client is the installed package.
sys.path.insert(0, str(Path(__file__).parent))
