"""``python -m autogradcli``: the client (``autogradcli.client``), as the console script."""

from autogradcli.client import main

if __name__ == "__main__":
    main()
