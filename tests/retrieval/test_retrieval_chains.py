"""ReG's chain reorganisation (Algorithm 1, both directions, merging) on toy triples."""

from __future__ import annotations

from kgrag.kg.chains import chain_context, chains, flat_context

MASCOT = [
    ("Lou Seal", "sports.mascot.team", "San Francisco Giants"),
    ("San Francisco Giants", "sports.team.championships", "2010 World Series"),
    ("San Francisco Giants", "sports.team.championships", "2012 World Series"),
    ("San Francisco Giants", "sports.team.arena", "AT&T Park"),
]


def test_forward_chains_grow_from_the_topic_entity_and_merge_answers():
    found = chains(MASCOT, ["Lou Seal"], length=2)
    texts = [c.text() for c in found]
    assert texts == [
        ("Lou Seal → [sports.mascot.team] → San Francisco Giants → "
        "[sports.team.championships] → 2010 World Series; 2012 World Series"),
        ("Lou Seal → [sports.mascot.team] → San Francisco Giants → [sports.team.arena] → "
        "AT&T Park")]


def test_length_one_keeps_only_the_first_hop_and_the_rest_as_single_triples():
    found = chains(MASCOT, ["Lou Seal"], length=1)
    assert found[0].text() == "Lou Seal → [sports.mascot.team] → San Francisco Giants"
    # the unreachable triples are kept, merged by head and relation
    assert [c.text() for c in found[1:]] == [
        ("San Francisco Giants → [sports.team.championships] → 2010 World Series; "
        "2012 World Series"),
        "San Francisco Giants → [sports.team.arena] → AT&T Park"]


def test_backward_chains_end_at_the_topic_entity():
    triples = [("Barack Obama", "people.person.spouse", "Michelle Obama"),
               ("Sasha Obama", "people.person.parents", "Barack Obama")]
    texts = [c.text() for c in chains(triples, ["Michelle Obama"], length=2)]
    assert texts == [("Sasha Obama → [people.person.parents] → Barack Obama → "
                     "[people.person.spouse] → Michelle Obama")]


def test_unnamed_intermediates_do_not_keep_answers_apart():
    triples = [("Team", "championships", "m.01"), ("m.01", "event", "2010 Series"),
               ("Team", "championships", "m.02"), ("m.02", "event", "2012 Series")]
    texts = [c.text() for c in chains(triples, ["Team"], length=2)]
    assert texts == ["Team → [championships] → m.01 → [event] → 2010 Series; 2012 Series"]


def test_multi_entity_merging_keeps_shared_ends_side_by_side():
    triples = [("Actor A", "film.actor.film", "Film X"),
               ("Actor B", "film.actor.film", "Film Y"),
               ("Actor A", "film.actor.film", "Film Z"),
               ("Actor B", "film.actor.film", "Film Z"),
               ("Actor A", "people.person.born", "Paris")]
    texts = [c.text() for c in chains(triples, ["Actor A", "Actor B"], length=2)]
    assert texts == ["Actor A → [film.actor.film] → Film Z",
                     "Actor B → [film.actor.film] → Film Z",
                     "Actor A → [people.person.born] → Paris"]


def test_context_formats():
    assert chain_context(MASCOT[:1], ["Lou Seal"]) == (
        "Chain 1. Lou Seal → [sports.mascot.team] → San Francisco Giants")
    assert flat_context(MASCOT[:2]) == (
        "(Lou Seal, sports.mascot.team, San Francisco Giants)\n"
        "(San Francisco Giants, sports.team.championships, 2010 World Series)")
