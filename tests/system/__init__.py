"""Tests on network namespaces and virtual testbeds, as root, one at a time."""
