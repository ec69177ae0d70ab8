"""All the nodes of a testbed, with operations run on every node in parallel."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from typing_extensions import Self, Unpack

from r2bench.config.testbed import Node as NodeModel
from r2bench.config.testbed import Testbed, TestbedKind
from r2bench.nodes.base import Command, CommandResult, Node, NodeError, RunOptions
from r2bench.nodes.local import LocalNode
from r2bench.nodes.ssh import SshNode

T = TypeVar("T")

MAX_PARALLEL = 32


def make_node(kind: TestbedKind, model: NodeModel) -> Node:
    """The node implementation for a testbed kind: ssh/virtual over ssh, local as subprocesses."""
    if kind is TestbedKind.LOCAL:
        return LocalNode.from_model(model)
    return SshNode.from_model(model)


class NodePool:
    """The testbed's nodes by name; a context manager that closes every connection on exit."""

    def __init__(self, nodes: Mapping[str, Node]) -> None:
        self.nodes = dict(nodes)

    @classmethod
    def from_testbed(cls, testbed: Testbed) -> NodePool:
        """One node object per testbed node, of the kind the testbed says."""
        return cls({model.name: make_node(testbed.kind, model) for model in testbed.nodes})

    def __getitem__(self, name: str) -> Node:
        return self.nodes[name]

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def __len__(self) -> int:
        return len(self.nodes)

    def map(self, operation: Callable[[Node], T]) -> dict[str, T | NodeError]:
        """Apply `operation` to every node in parallel; a NodeError is returned, not raised."""

        def guarded(node: Node) -> T | NodeError:
            try:
                return operation(node)
            except NodeError as exc:
                return exc

        workers = max(1, min(MAX_PARALLEL, len(self.nodes)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="r2bench-node") as pool:
            futures = {name: pool.submit(guarded, node) for name, node in self.nodes.items()}
            return {name: future.result() for name, future in futures.items()}

    def run_all(
        self, command: Command, **options: Unpack[RunOptions]
    ) -> dict[str, CommandResult | NodeError]:
        """Run one command on every node in parallel; per node, its result or its error.

        Takes `Node.run`'s keyword options; `check` defaults to False here.
        """
        options.setdefault("check", False)
        return self.map(lambda node: node.run(command, **options))

    def close(self) -> None:
        """Close every node's connection."""
        for node in self.nodes.values():
            node.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
