"""One prepared run of chute on a machine with an accelerator and many cores.

See `run.sh` (the entry point), `prepare.sh` (what to run here first) and the section
"On an accelerator" of docs/pages/performance.md.
"""
