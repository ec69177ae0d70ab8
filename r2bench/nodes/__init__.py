"""Nodes: where commands run (this machine, or a host over ssh), behind one small interface."""

from r2bench.nodes.base import (
    Command,
    CommandResult,
    LineHandler,
    Node,
    NodeError,
    StreamLine,
)
from r2bench.nodes.local import LocalNode
from r2bench.nodes.pool import NodePool, make_node
from r2bench.nodes.ssh import SshNode

__all__ = [
    "Command",
    "CommandResult",
    "LineHandler",
    "LocalNode",
    "Node",
    "NodeError",
    "NodePool",
    "SshNode",
    "StreamLine",
    "make_node",
]
