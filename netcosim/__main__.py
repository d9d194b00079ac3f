"""`python -m netcosim ...` is the same as the `netcosim` command."""
import sys

from netcosim.cli import main

if __name__ == "__main__":
    sys.exit(main())
