"""Tests with real processes on this host: sshd, mpirun, the CLI in a subprocess, a browser."""
