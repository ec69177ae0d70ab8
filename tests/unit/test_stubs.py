"""The NCCL stub library, pure part: symbol tables in, missing functions and C source out.

This module holds its pure tests, on captured `nm -D` text; the same subject's other tests:
tests/integration/test_stubs_build.py (real libraries compiled, the stubs built and loaded).
"""

from __future__ import annotations

import ast
import re

import pytest

from r2bench.setup.stubs import (
    CALLED_LINE,
    STUB_MARK,
    NmSymbol,
    called_stubs,
    is_nccl_name,
    missing_functions,
    parse_nm,
    render_source,
    stub_library,
)

# What PyTorch 2.11's libtorch_cuda.so needs that NCCL 2.23.4 lacks (../shared/R2CCL-FACTS.md).
ISSUE_SIX = (
    "ncclAlltoAll",
    "ncclCommShrink",
    "ncclCommWindowDeregister",
    "ncclCommWindowRegister",
    "ncclDevCommCreate",
    "ncclDevCommDestroy",
)

# `nm -D --undefined-only libtorch_cuda.so`, cut down: C++ and CUDA names, glibc's versioned
# ones, weak references, the profiling aliases, and names that start with nccl but are not API.
CONSUMER_NM = """\
                 w _ITM_deregisterTMCloneTable
                 w __gmon_start__
                 U _ZN3c1019UndefinedTensorImpl10_singletonE
                 U cudaMalloc@libcudart.so.13
                 U memcpy@GLIBC_2.14
                 U ncclAllReduce
                 U ncclAlltoAll
                 U ncclAlltoAll@NCCL_2.28
                 U ncclCommInitRankConfig
                 U ncclCommShrink
                 U ncclCommWindowDeregister
                 U ncclCommWindowRegister
                 U ncclDevCommCreate
                 U ncclDevCommDestroy
                 U ncclGetVersion@NCCL_2
                 U ncclGroupStart
                 w ncclMemAlloc
                 U nccl_net_v8
                 U ncclx
                 U pncclAllReduce
                 U pncclCommShrink
"""

# `nm -D --defined-only libnccl.so.2` of an NCCL 2.23.4, cut down: a version definition, versioned
# and plain names, a weak and an indirect function, data, a C++ helper.
PROVIDER_NM = """\
0000000000000000 A NCCL_2
000000000004a2b0 T ncclAllReduce@@NCCL_2
000000000004a2b0 T pncclAllReduce@@NCCL_2
0000000000051000 W ncclCommInitRankConfig
0000000000051100 T ncclGetVersion@NCCL_2.x
0000000000051200 i ncclGroupStart
0000000000051300 T pncclCommShrinkAll
00000000000a0000 D ncclNet_v8
0000000000052000 T _Z10ncclHelperv
"""


def test_parse_nm_reads_kind_and_strips_the_version() -> None:
    symbols = parse_nm(PROVIDER_NM)
    assert NmSymbol("ncclAllReduce", "T") in symbols
    assert NmSymbol("ncclGetVersion", "T") in symbols
    assert NmSymbol("ncclCommInitRankConfig", "W") in symbols
    assert NmSymbol("NCCL_2", "A") in symbols
    assert all("@" not in symbol.name for symbol in symbols)
    undefined = parse_nm(CONSUMER_NM)
    assert NmSymbol("memcpy", "U") in undefined
    assert NmSymbol("__gmon_start__", "w") in undefined


def test_parse_nm_skips_lines_that_are_not_symbols() -> None:
    text = (
        "\nlibnccl.so.2:\nnm: libempty.so: no symbols\n" + "000000000004a2b0 T ncclSend@@NCCL_2\n"
    )
    assert parse_nm(text) == [NmSymbol("ncclSend", "T")]


@pytest.mark.parametrize(
    ("kind", "defined"),
    [("T", True), ("W", True), ("i", True), ("D", True), ("U", False), ("w", False), ("v", False)],
)
def test_defined_follows_the_type_letter(kind: str, defined: bool) -> None:
    assert NmSymbol("ncclX", kind).defined is defined


@pytest.mark.parametrize(
    ("name", "nccl"),
    [
        ("ncclAllReduce", True),
        ("pncclAllReduce", True),
        ("nccl_net_v8", False),
        ("ncclx", False),
        ("xncclAllReduce", False),
        ("ppncclAllReduce", False),
        ("_Z10ncclHelperv", False),
        ("memcpy", False),
    ],
)
def test_only_names_of_nccls_api_count(name: str, nccl: bool) -> None:
    assert is_nccl_name(name) is nccl


def test_missing_functions_are_the_issues_six_and_the_profiling_alias() -> None:
    missing = missing_functions(parse_nm(CONSUMER_NM), parse_nm(PROVIDER_NM))
    # Sorted, each once (ncclAlltoAll is referenced twice, with and without a version); the
    # weak reference ncclMemAlloc, the non-API nccl_net_v8 and ncclx, glibc and C++ are left out;
    # the provider's weak (W) and indirect (i) definitions count as defined.
    assert missing == (*ISSUE_SIX, "pncclCommShrink")


def test_nothing_is_missing_when_the_provider_defines_everything() -> None:
    consumer = parse_nm(CONSUMER_NM)
    everything = [NmSymbol(symbol.name, "T") for symbol in consumer]
    assert missing_functions(consumer, everything) == ()


def test_an_undefined_symbol_of_the_provider_does_not_define_it() -> None:
    provider = parse_nm("                 U ncclCommShrink\n")
    expected = {*ISSUE_SIX, "ncclAllReduce", "ncclCommInitRankConfig", "ncclGetVersion"}
    expected |= {"ncclGroupStart", "pncclAllReduce", "pncclCommShrink"}
    assert missing_functions(parse_nm(CONSUMER_NM), provider) == tuple(sorted(expected))


def test_stub_library_carries_names_paths_and_source() -> None:
    library = stub_library(
        "/torch/lib/libtorch_cuda.so", CONSUMER_NM, "/r2ccl/libnccl.so.2", PROVIDER_NM
    )
    assert library.names == (*ISSUE_SIX, "pncclCommShrink")
    assert library.consumer == "/torch/lib/libtorch_cuda.so"
    assert library.provider == "/r2ccl/libnccl.so.2"
    assert library.source == render_source(library.names, library.consumer, library.provider)


def test_source_defines_each_name_once_returning_invalid_usage() -> None:
    source = render_source(ISSUE_SIX, "/torch/libtorch_cuda.so", "/r2ccl/libnccl.so.2")
    defined = re.findall(r"^int (\w+)\(void\) \{$", source, re.M)
    assert defined == list(ISSUE_SIX)
    assert source.count("return 5;") == len(ISSUE_SIX)
    assert source.count("static int said;") == len(ISSUE_SIX)
    assert "#include <stdio.h>" in source
    assert "ncclAllReduce" not in source


def test_source_header_lists_consumer_provider_and_names() -> None:
    source = render_source(ISSUE_SIX, "/torch/libtorch_cuda.so", "/r2ccl/libnccl.so.2")
    header = source[: source.index("*/")]
    assert "consumer: /torch/libtorch_cuda.so" in header
    assert "provider: /r2ccl/libnccl.so.2" in header
    assert "lacks (6):" in header
    assert all(f" *   {name}\n" in header for name in ISSUE_SIX)


def test_a_path_cannot_end_the_header_comment() -> None:
    source = render_source(["ncclCommShrink"], "/odd*/dir/libtorch.so", "/r2ccl/libnccl.so.2")
    assert source.count("*/") == 1


def _printed_lines(source: str) -> list[str]:
    """What each stub's fputs writes, decoded from the C literals of the source."""
    literals = re.findall(r'fputs\(("(?:[^"\\]|\\.)*"), stderr\)', source)
    # C's escapes used here (\" \\ \ooo) read the same in a Python bytes literal.
    return [ast.literal_eval("b" + literal).decode() for literal in literals]


def test_each_stub_prints_the_marked_line_the_reader_finds() -> None:
    provider = '/opt/nccl "2.23.4"\\ü?%s/libnccl.so.2'
    source = render_source(["ncclAlltoAll", "pncclCommShrink"], "/torch.so", provider)
    lines = _printed_lines(source)
    assert lines == [
        f"{STUB_MARK} ncclAlltoAll called: the NCCL under test ({provider}) lacks it\n",
        f"{STUB_MARK} pncclCommShrink called: the NCCL under test ({provider}) lacks it\n",
    ]
    match = CALLED_LINE.search(lines[0])
    assert match is not None and match["provider"] == provider
    assert called_stubs("".join(lines)) == ["ncclAlltoAll", "pncclCommShrink"]


def test_the_source_has_no_raw_non_ascii_or_trigraph() -> None:
    source = render_source(["ncclAlltoAll"], "/t.so", "/ü??=/libnccl.so.2")
    body = source[source.index("#include") :]
    assert body.isascii()
    assert "??" not in body


def test_called_stubs_finds_prefixed_lines_in_a_log_each_once() -> None:
    log = (
        "[1,0]<stderr>:NCCL INFO NCCL version 2.23.4+cuda13.0\n"
        f"[1,0]<stderr>:{STUB_MARK} ncclCommShrink called: the NCCL under test (/r/libnccl.so.2) lacks it\n"
        f"[1,1]<stderr>:{STUB_MARK} ncclCommShrink called: the NCCL under test (/r/libnccl.so.2) lacks it\n"
        f"{STUB_MARK} ncclDevCommCreate called: the NCCL under test (/r/libnccl.so.2) lacks it\n"
        "r2bench-nccl-stub: memcpy called: the NCCL under test (/r) lacks it\n"
    )
    assert called_stubs(log) == ["ncclCommShrink", "ncclDevCommCreate"]
    assert called_stubs("NCCL WARN ncclCommShrink: invalid usage\n") == []


def test_an_empty_list_renders_a_source_without_functions() -> None:
    library = stub_library("/t.so", CONSUMER_NM, "/n.so", CONSUMER_NM.replace(" U ", " T "))
    assert library.names == ()
    assert "lacks (0):" in library.source
    assert "int " not in library.source


def test_render_refuses_a_name_that_is_not_ncclS() -> None:
    with pytest.raises(ValueError, match="memcpy"):
        render_source(["memcpy"], "/t.so", "/n.so")
