"""``python -m autogradcli``."""

from autogradcli.cli import main

if __name__ == "__main__":
    main()
