"""run_architecture: the ONE "run one architecture" function, and run_on for other processes.

The top floor of worker/run: it takes the checks, the reference and the process helpers below it.
"""
