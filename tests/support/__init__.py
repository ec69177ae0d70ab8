"""What the tiers share: the CLI runner, sample sweeps, captures, a loopback sshd, fake tools."""
