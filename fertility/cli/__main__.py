"""`python -m fertility.cli`."""

from fertility.cli import main

if __name__ == "__main__":  # not when a tool imports every module
    main()
