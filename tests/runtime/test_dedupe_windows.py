"""A broken rule's dedupe window: the first violation names it, later ones within its seconds
land in it (one finding), whatever the ids hold, for a whole batch in one command."""

from runtime import windows


def test_the_first_candidate_names_the_window_and_later_ones_land_in_it(redis_client):
    first = windows.window_ids([("7:rate:/data/crm:40", "event-1", 3600),
                                ("8:rate:/data/crm:40", "événement, 2/b", 3600),
                                ("7:rate:/data/crm:40", "event-3", 3600)])
    # The third broke the same rule as the first, in the same batch: the first's window.
    assert first == ["event-1", "événement, 2/b", "event-1"]
    again = windows.window_ids([("8:rate:/data/crm:40", "event-4", 3600),
                                ("9:rate:/data/crm:40", "event-5", 60)])
    assert again == ["événement, 2/b", "event-5"]
    assert 0 < redis_client.ttl("bw:dedupe:9:rate:/data/crm:40") <= 60
    assert windows.window_ids([]) == []


def test_a_window_past_its_seconds_is_named_again(redis_client):
    assert windows.window_ids([("7:rate:/data/crm:40", "event-1", 3600)]) == ["event-1"]
    redis_client.delete("bw:dedupe:7:rate:/data/crm:40")  # as its expiry does
    assert windows.window_ids([("7:rate:/data/crm:40", "event-9", 3600)]) == ["event-9"]
