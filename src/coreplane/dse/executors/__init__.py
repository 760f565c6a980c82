"""Where sweep runs execute: this machine (local.py) or a Slurm cluster (slurm.py)."""
