"""`python -m fertility`: the `fertility` command; also what torchrun runs
(`torchrun --nproc-per-node N -m fertility pretrain ...`)."""

from fertility.cli import main

if __name__ == "__main__":  # not when a tool imports every module
    main()
