"""ReG's two graph retrievers on small synthetic question graphs whose positive triples are
identifiable from the question and the topology: the SubgraphRAG triple scorer (DDE + MLP)
and the PNA entity scorer learn to rank them first, are seeded, round-trip through their
save folder, and refuse graphs they cannot score."""

import numpy as np
import pytest
import torch

from kgrag.errors import KgragError
from kgrag.kg.question_graph import QuestionGraph
from kgrag.training.entity_scorer import (
    EntityScorerSettings,
    load_entity_scorer,
    train_entity_scorer,
)
from kgrag.training.triple_scorer import (
    ScorerSettings,
    dde,
    load_triple_scorer,
    match_features,
    recall_at,
    train_triple_scorer,
)

DIM = 16


def entity_scores(scorer, graph: QuestionGraph) -> np.ndarray:
    """p(e) for every entity of the graph, (n_e,)."""
    with torch.no_grad():
        return torch.sigmoid(scorer.module.logits(scorer.module.inputs(graph))).numpy()

RELATIONS = np.random.default_rng(7).normal(size=(5, DIM)).astype(np.float32)


def _graph(seed: int, labelled: bool = True) -> QuestionGraph:
    """40 entities, 100 random triples, entity 0 the topic with 12 outgoing triples. The
    question is a noisy copy of one relation's embedding; the positives are the topic's
    triples with that relation (forced to hold at least one). The triple-text similarity is
    noise here: the positives follow from the question, the relations and the topology."""
    r = np.random.default_rng(seed)
    n_e, n_t = 40, 100
    head, tail = r.integers(1, n_e, n_t), r.integers(1, n_e, n_t)
    relation = r.integers(0, len(RELATIONS), n_t)
    head[:12] = 0
    target = int(r.integers(0, len(RELATIONS)))
    relation[0] = target
    question = RELATIONS[target] + 0.1 * r.normal(size=DIM).astype(np.float32)
    labels = ((head == 0) & (relation == target)).astype(np.float32)
    return QuestionGraph(question=question, entities=r.normal(size=(n_e, DIM)).astype(np.float32),
                         textless=r.random(n_e) < 0.2, relations=RELATIONS, head=head,
                         relation=relation, tail=tail, topic=np.array([0]),
                         labels=labels if labelled else None,
                         similarity=r.normal(size=n_t).astype(np.float32))


TRAIN = [_graph(i) for i in range(40)]
HELD_OUT = [_graph(100 + i) for i in range(20)]


def _recall(scorer, graphs, k=5):
    return float(np.mean([recall_at(scorer.scores(g), g.labels > 0, k) for g in graphs]))


def _chance(graphs, k=5):
    return k / np.mean([g.triples for g in graphs])


def test_dde_propagates_the_topic_one_hot_by_mean_along_and_against_the_edges():
    # a → b, b → c, a → c, d → c; topic a (entity 0)
    pe = dde([0], head=[0, 1, 0, 3], tail=[1, 2, 2, 2], entities=4).numpy()
    one_hot = [[0, 1], [1, 0], [1, 0], [1, 0]]
    forward_1 = [[0, 0], [0, 1], [2 / 3, 1 / 3], [0, 0]]
    forward_2 = [[0, 0], [0, 0], [0, 1 / 3], [0, 0]]
    reverse_1 = [[1, 0], [1, 0], [0, 0], [1, 0]]
    reverse_2 = [[0.5, 0], [0, 0], [0, 0], [0, 0]]
    expected = np.concatenate([one_hot, forward_1, forward_2, reverse_1, reverse_2], axis=1)
    np.testing.assert_allclose(pe, expected, atol=1e-7)


def test_the_triple_scorer_learns_to_rank_the_positive_triples_first():
    scorer = train_triple_scorer(TRAIN, ScorerSettings(epochs=30))
    assert scorer.losses[-1] < 0.5 * scorer.losses[0]
    assert len(scorer.losses) == 30 and scorer.best_epoch == 30
    assert _recall(scorer, HELD_OUT) > 0.8 > 5 * _chance(HELD_OUT)


def test_the_entity_scorer_learns_to_rank_the_positive_triples_first():
    scorer = train_entity_scorer(TRAIN, EntityScorerSettings(epochs=15, hidden=32))
    assert scorer.losses[-1] < 0.5 * scorer.losses[0]
    assert _recall(scorer, HELD_OUT) > 0.8 > 5 * _chance(HELD_OUT)
    graph = HELD_OUT[0]
    p = entity_scores(scorer, graph)
    np.testing.assert_allclose(scorer.scores(graph), p[graph.head] + p[graph.tail], rtol=1e-6)


def test_the_published_triple_scorer_is_the_mlp_over_the_concatenated_triple_features():
    scorer = train_triple_scorer(TRAIN[:2], ScorerSettings(epochs=1, hidden=8, match=False))
    graph, net = HELD_OUT[0], scorer.module.net
    shared = net["textless"].weight.detach().numpy()[0]
    entities = np.where(graph.textless[:, None], shared, graph.entities)
    entities = np.concatenate(
        [entities, dde(graph.topic, graph.head, graph.tail, len(entities)).numpy()], axis=1)
    features = np.concatenate([np.broadcast_to(graph.question, (graph.triples, DIM)),
                               entities[graph.head], graph.relations[graph.relation],
                               entities[graph.tail]], axis=1)
    with torch.no_grad():
        expected = net["second"](torch.relu(net["first"](torch.from_numpy(features))))
    np.testing.assert_allclose(scorer.scores(graph), expected.numpy()[:, 0], atol=1e-5)


def test_the_match_features_are_the_question_cosines_standardised_over_the_graph():
    graph = HELD_OUT[0]
    scorer = train_triple_scorer(TRAIN[:2], ScorerSettings(epochs=1, hidden=8))
    ends = np.where(graph.textless, 0.0, graph.entities @ graph.question)
    columns = np.stack([graph.similarity, (graph.relations @ graph.question)[graph.relation],
                        ends[graph.head], ends[graph.tail]], axis=1)
    expected = (columns - columns.mean(axis=0)) / columns.std(axis=0)
    np.testing.assert_allclose(match_features(scorer.module.inputs(graph)).numpy(), expected,
                               atol=1e-5)


def _cosine_graph(seed: int) -> QuestionGraph:
    """A graph whose positives only the question-triple similarity tells apart: random
    entities, relations and topology, 3 random positives that are the most similar triples."""
    graph = _graph(seed)
    r = np.random.default_rng(seed + 1000)
    labels = np.zeros(graph.triples, np.float32)
    labels[r.choice(graph.triples, 3, replace=False)] = 1.0
    similarity = (0.2 * r.normal(size=graph.triples) + labels).astype(np.float32)
    return QuestionGraph(**{**graph.__dict__, "labels": labels, "similarity": similarity})


def test_the_match_features_let_the_scorer_rank_by_the_question_triple_similarity():
    train, held_out = ([_cosine_graph(i) for i in range(20)],
                       [_cosine_graph(50 + i) for i in range(20)])
    matched = train_triple_scorer(train, ScorerSettings(epochs=2))
    published = train_triple_scorer(train, ScorerSettings(epochs=2, match=False))
    assert _recall(matched, held_out) > 0.9
    assert _recall(published, held_out) < 0.3


def test_a_matching_scorer_refuses_a_graph_without_similarities():
    scorer = train_triple_scorer(TRAIN[:2], ScorerSettings(epochs=1))
    with pytest.raises(KgragError, match="match features"):
        scorer.scores(QuestionGraph(**{**HELD_OUT[0].__dict__, "similarity": None}))


@pytest.mark.parametrize("train", [
    lambda graphs, seed: train_triple_scorer(graphs, ScorerSettings(epochs=3, seed=seed)),
    lambda graphs, seed: train_entity_scorer(graphs, EntityScorerSettings(epochs=3, hidden=16,
                                                                          seed=seed))])
def test_the_same_seed_gives_the_same_losses(train):
    first, second, other = (train(TRAIN[:10], seed) for seed in (1, 1, 2))
    assert first.losses == second.losses
    assert first.losses != other.losses


@pytest.mark.parametrize("train, load", [
    (lambda g: train_triple_scorer(g, ScorerSettings(epochs=2)), load_triple_scorer),
    (lambda g: train_entity_scorer(g, EntityScorerSettings(epochs=2, hidden=16)),
     load_entity_scorer)])
def test_a_saved_scorer_loads_back_with_identical_scores(tmp_path, train, load):
    scorer = train(TRAIN[:5])
    scorer.save(tmp_path / "scorer")
    loaded = load(tmp_path / "scorer")
    unlabelled = _graph(100, labelled=False)
    np.testing.assert_array_equal(loaded.scores(unlabelled), scorer.scores(unlabelled))
    assert loaded.losses == scorer.losses and loaded.report == scorer.report


def test_loading_the_wrong_kind_or_an_empty_folder_is_refused(tmp_path):
    train_triple_scorer(TRAIN[:2], ScorerSettings(epochs=1)).save(tmp_path / "triple")
    with pytest.raises(KgragError, match="triple scorer, not a entity"):
        load_entity_scorer(tmp_path / "triple")
    with pytest.raises(KgragError, match="no trained retriever"):
        load_triple_scorer(tmp_path / "empty")


def test_validation_keeps_the_epoch_with_the_best_recall():
    scorer = train_triple_scorer(TRAIN[:10], ScorerSettings(epochs=6, lr=3e-2), HELD_OUT[:5])
    recalls = scorer.report["validation_recall"]
    assert len(recalls) == 6 and scorer.report["validation_questions"] == 5
    assert scorer.best_epoch == 1 + int(np.argmax(recalls))
    kept = float(np.mean([recall_at(scorer.scores(g), g.labels > 0, 100) for g in HELD_OUT[:5]]))
    assert kept == pytest.approx(max(recalls))


def test_graphs_without_a_positive_label_are_skipped_and_counted():
    unlabelled = _graph(3)
    unlabelled = QuestionGraph(**{**unlabelled.__dict__, "labels": np.zeros(100, np.float32)})
    scorer = train_triple_scorer(TRAIN[:3] + [unlabelled], ScorerSettings(epochs=1))
    assert scorer.report["skipped"] == 1 and scorer.report["questions"] == 3
    with pytest.raises(KgragError, match="no training question graph has a positive"):
        train_triple_scorer([unlabelled], ScorerSettings(epochs=1))


@pytest.mark.parametrize("train", [
    lambda g: train_triple_scorer(g, ScorerSettings(epochs=1)),
    lambda g: train_entity_scorer(g, EntityScorerSettings(epochs=1, hidden=8))])
def test_a_graph_without_edges_cannot_be_scored(train):
    scorer = train(TRAIN[:2])
    empty = np.array([], dtype=np.int64)
    graph = QuestionGraph(question=TRAIN[0].question, entities=TRAIN[0].entities[:1],
                          textless=np.array([False]), relations=RELATIONS, head=empty,
                          relation=empty, tail=empty, topic=np.array([0]))
    with pytest.raises(KgragError, match="no triples"):
        scorer.scores(graph)


@pytest.mark.parametrize("train", [
    lambda g: train_triple_scorer(g, ScorerSettings(epochs=1)),
    lambda g: train_entity_scorer(g, EntityScorerSettings(epochs=1, hidden=8))])
def test_textless_entities_share_one_learned_embedding(train):
    scorer = train(TRAIN[:3])
    graph = HELD_OUT[0]
    assert graph.textless.any() and not graph.textless.all()
    renamed = graph.entities.copy()
    renamed[graph.textless] += 5.0
    same = QuestionGraph(**{**graph.__dict__, "entities": renamed})
    np.testing.assert_array_equal(scorer.scores(same), scorer.scores(graph))
    renamed[~graph.textless] += 5.0
    different = QuestionGraph(**{**graph.__dict__, "entities": renamed})
    assert not np.allclose(scorer.scores(different), scorer.scores(graph))


@pytest.mark.parametrize("train", [
    lambda g, epochs: train_triple_scorer(g, ScorerSettings(epochs=epochs)),
    lambda g, epochs: train_entity_scorer(g, EntityScorerSettings(epochs=epochs, hidden=8))])
def test_the_shared_textless_embedding_is_learned(train):
    once, twice = (train(TRAIN[:3], epochs).module.net["textless"].weight for epochs in (1, 2))
    assert once.shape == (1, DIM) and not torch.equal(once, twice)


def test_a_malformed_graph_or_another_embedding_size_is_refused():
    scorer = train_triple_scorer(TRAIN[:2], ScorerSettings(epochs=1))
    graph = HELD_OUT[0]
    with pytest.raises(KgragError, match="head indices fall outside"):
        scorer.scores(QuestionGraph(**{**graph.__dict__, "head": graph.head + 40}))
    with pytest.raises(KgragError, match="trained on size 16"):
        scorer.scores(QuestionGraph(**{**graph.__dict__,
                                       "question": np.zeros(8, np.float32),
                                       "entities": np.zeros((40, 8), np.float32),
                                       "relations": np.zeros((5, 8), np.float32)}))
