"""JSON pointers are written and read one way (config/pointers.py, RFC 6901): the standard's
own examples, and every module that names a drift, a waiver or a request field agrees."""

import pytest

from config import pointers
from reconciliation.reconciler.diff import json_pointer
from registry.manifest import join_pointer
from registry.waivers import tokens

# RFC 6901 section 5: the pointer and the key of the example document it names.
RFC_EXAMPLES = [("/foo", ["foo"]), ("/a~1b", ["a/b"]), ("/m~0n", ["m~n"]),
                ("/ ", [" "]), ("/c%d", ["c%d"]), ("/i\\j", ["i\\j"]), ("/k\"l", ["k\"l"]),
                ("", []), ("/foo/0", ["foo", "0"])]


@pytest.mark.parametrize(("text", "parts"), RFC_EXAMPLES)
def test_the_rfcs_examples_read_and_write_back(text, parts):
    assert pointers.tokens(text) == parts
    assert pointers.pointer(*parts) == text


def test_every_module_spells_a_tool_with_a_slash_the_same_way():
    name = "crm/search~v2"  # a tool name a platform might report
    spelled = {json_pointer("tools", name), join_pointer("/tools", name),
               pointers.join("/tools", name)}
    assert spelled == {"/tools/crm~1search~0v2"}
    assert tokens("/tools/crm~1search~0v2") == ["tools", name]
