"""Configuration: testbed, experiment and recipe files, validated with located errors."""

from r2bench.config.errors import ConfigError, ConfigIssue
from r2bench.config.testbed import Nic, NicKind, Node, Testbed, TestbedKind

__all__ = ["ConfigError", "ConfigIssue", "Nic", "NicKind", "Node", "Testbed", "TestbedKind"]
