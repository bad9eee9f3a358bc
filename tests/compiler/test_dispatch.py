"""Every backend has a handler for every plan node it dispatches on.

The plan's window, trigger and evictor families are closed unions
(``plan.Window``, ``plan.Trigger``, ``plan.Evictor``); each backend
dispatches on them through one table per family (``DISPATCH``, built with
``functools.singledispatch``). A class added to a union without a handler in
a backend fails here, not at run time on the first query that uses it. The
binder's tables cover the AST's unions (``ast.Window``, ...) the same way.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing

import pytest

from wql.compiler import explain
from wql.compiler import plan as P
from wql.compiler.backends import native, operator
from wql.compiler.binder import triggers, windows
from wql.compiler.capabilities import NATIVE, NATIVE_STREAMING
from wql.grammar import ast

FAMILIES = {"window": P.Window, "trigger": P.Trigger, "evictor": P.Evictor}
AST_FAMILIES = {"window": ast.Window, "trigger": ast.Trigger, "evictor": ast.Evictor}


def missing(table, union) -> list[str]:
    """The classes of ``union`` that ``table`` (a singledispatch function) has no handler for."""
    fallback = table.registry[object]
    return [c.__name__ for c in typing.get_args(union) if table.dispatch(c) is fallback]


@pytest.mark.parametrize("backend", [operator, explain], ids=["operator", "explain"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_backend_handles_every_node_of_the_family(backend, family):
    assert missing(backend.DISPATCH[family], FAMILIES[family]) == []


@pytest.mark.parametrize("family", list(AST_FAMILIES))
def test_binder_handles_every_ast_node_of_the_family(family):
    table = {**windows.DISPATCH, **triggers.DISPATCH}[family]
    assert missing(table, AST_FAMILIES[family]) == []


def test_native_handles_every_window_it_declares_and_only_those():
    handled = {
        c.kind for c in typing.get_args(P.Window) if not missing(native.DISPATCH["window"], c)
    }
    assert NATIVE.windows | NATIVE_STREAMING.windows <= handled
    # the others are declared away (the planner never sends them to the backend)
    for c in typing.get_args(P.Window):
        if c.kind not in handled:
            assert c.kind not in NATIVE.windows | NATIVE_STREAMING.windows


def test_the_check_finds_a_missing_handler():
    @functools.singledispatch
    def table(node):
        raise TypeError(node)

    table.register(P.Tumble, lambda node: "tumble")
    assert missing(table, P.Window) == [
        "Hop",
        "Cumulate",
        "Session",
        "DynamicSession",
        "CountWindow",
        "GlobalWindow",
    ]


def _plan_classes(test) -> set[type]:
    return {
        c
        for _, c in inspect.getmembers(P, inspect.isclass)
        if c.__module__ == P.__name__ and dataclasses.is_dataclass(c) and test(c)
    }


def test_the_unions_hold_every_class_of_their_family():
    # a new node class must join its union (and so every table above)
    windows = _plan_classes(lambda c: isinstance(getattr(c, "kind", None), str))
    triggers = _plan_classes(lambda c: isinstance(getattr(c, "mergeable", None), property))
    evictors = _plan_classes(
        lambda c: (
            c.__name__.endswith("Evictor") and "after" in {f.name for f in dataclasses.fields(c)}
        )
    )
    assert windows == set(typing.get_args(P.Window))
    assert triggers == set(typing.get_args(P.Trigger))
    assert evictors == set(typing.get_args(P.Evictor))


def test_the_ast_unions_hold_every_class_of_their_family():
    def subclasses(base) -> set[type]:
        return {
            c
            for _, c in inspect.getmembers(ast, inspect.isclass)
            if issubclass(c, base) and c is not base
        }

    assert subclasses(ast.WindowSpec) == set(typing.get_args(ast.Window))
    assert subclasses(ast.TriggerSpec) == set(typing.get_args(ast.Trigger))
    assert subclasses(ast.EvictorSpec) == set(typing.get_args(ast.Evictor))


def test_every_stage_kind_is_planned_and_explained():
    from wql.compiler import planner

    kinds = set(typing.get_args(P.Stage))
    assert set(planner._BLOCKERS) == kinds
    assert set(planner._NATIVE_REASONS) == kinds
    assert set(explain.STAGES) == kinds


def test_every_stage_kind_is_lowered_natively_and_scripted():
    from wql.compiler.backends import pyspark_script

    kinds = set(typing.get_args(P.Stage))
    assert set(native.STAGE_KINDS) == kinds
    assert set(pyspark_script._BODIES) == kinds
    assert set(pyspark_script._DROPS) == kinds
    # a join lowers with its sides; every window stage lowers on its own input
    one_input = {k for k, v in native.STAGE_KINDS.items() if v.lower is not None}
    assert one_input == set(typing.get_args(P.OperatorStage))
    assert one_input == {k for k, v in native.STAGE_KINDS.items() if v.drop_conditions}
