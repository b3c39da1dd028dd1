"""Two witnesses, as a pure function: the source of record wins on what it covers, and both
accounts are kept for the finding."""

from reconciliation.witnesses import said, witness

REPORTED = {"tools": ["orders.lookup"],
            "data": [{"resource": "crm", "access": "read"},
                     {"resource": "orders_db", "access": "read"}],
            "grants": [{"resource": "crm", "access": "write", "expires_at": "2030-01-01T00:00Z"},
                       {"resource": "payments", "access": "write",
                        "expires_at": "2030-01-01T00:00Z"}]}


def test_the_source_of_record_replaces_what_the_agent_said_on_what_it_covers():
    state, witnesses = witness(REPORTED, {"crm-db": {"crm": "write"}})
    assert state["data"] == [{"resource": "crm", "access": "write"},
                             {"resource": "orders_db", "access": "read"}]
    assert state["grants"] == [REPORTED["grants"][1]]  # the agent's crm grant is not evidence
    assert state["tools"] == ["orders.lookup"]
    assert witnesses == {"/data/crm": {"agent": ["read", "write"], "crm-db": "write",
                                       "of_record": "crm-db", "agree": False}}
    assert said(witnesses["/data/crm"]) == (
        "the agent reported read and write; crm-db (the source of record) says write")


def test_no_access_at_the_source_removes_the_resource_whatever_the_agent_says():
    state, witnesses = witness({"data": [{"resource": "crm", "access": "read"}]},
                               {"crm-db": {"crm": None}})
    assert state == {"data": []}
    assert said(witnesses["/data/crm"]) == (
        "the agent reported read; crm-db (the source of record) says no access")


def test_witnesses_that_agree_say_so_and_a_silent_agent_is_a_witness_too():
    _, agreeing = witness({"data": [{"resource": "crm", "access": "read"}]},
                          {"crm-db": {"crm": "read"}})
    assert agreeing["/data/crm"]["agree"] is True
    state, silent = witness({"tools": []}, {"crm-db": {"crm": "read", "a/b": None}})
    assert state["data"] == [{"resource": "crm", "access": "read"}]
    assert silent["/data/crm"]["agent"] is None and "/data/a~1b" in silent


def test_a_source_covering_a_tool_decides_whether_the_agent_has_it():
    reported = {"tools": ["orders.lookup", "s3.get_object"], "data": []}
    state, witnesses = witness(reported, {"aws": {}}, {"aws": {
        "s3.get_object": None, "s3.put_object": "partial", "s3.list": "allowed"}})
    assert state["tools"] == ["orders.lookup", "s3.list", "s3.put_object"]
    assert witnesses["/tools/s3.get_object"] == {
        "agent": "listed", "aws": None, "of_record": "aws", "tool_name": "s3.get_object",
        "agree": False}
    assert said(witnesses["/tools/s3.get_object"]) == (
        "the agent listed tool s3.get_object; aws (the source of record) says its role is not "
        "allowed it")
    assert said(witnesses["/tools/s3.put_object"]) == (
        "the agent did not list tool s3.put_object; aws (the source of record) says its role "
        "is allowed part of what it needs")
    assert reported["tools"] == ["orders.lookup", "s3.get_object"]  # not changed in place


def test_a_source_named_like_a_witness_key_still_reads_as_a_data_witness():
    _, witnesses = witness({"data": []}, {"tool": {"crm": "read"}})
    assert said(witnesses["/data/crm"]) == (
        "the agent reported no access; tool (the source of record) says read")


def test_what_an_agent_lists_that_is_no_tool_name_is_kept_and_never_taken_for_one():
    hostile = ['s3.put_object"; --', {"name": "s3.put_object"}, None]
    state, witnesses = witness({"tools": hostile}, {}, {"aws": {"s3.put_object": None}})
    assert state["tools"] == sorted(hostile, key=str)
    assert witnesses["/tools/s3.put_object"]["agent"] is None
