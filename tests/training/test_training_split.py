"""The split by question: exact shares, stable under reordering, disjoint from the
held-out questions every retrieve step keeps."""

from kgrag.training.split import held_out, split_of, training_questions

IDS = [f"q{i}" for i in range(200)]


def test_half_of_the_questions_train_and_the_rest_are_held_out():
    trained = training_questions(IDS, 0.5, 0)
    assert len(trained) == 100
    kept = held_out(IDS, [{"fraction": 0.5, "seed": 0}])
    assert len(kept) == 100 and not trained.intersection(kept)
    assert kept == [q for q in IDS if q in set(kept)]  # corpus order


def test_the_split_depends_on_ids_and_seed_not_on_order():
    assert training_questions(reversed(IDS), 0.5, 0) == training_questions(IDS, 0.5, 0)
    assert training_questions(IDS, 0.5, 1) != training_questions(IDS, 0.5, 0)


def test_every_entrys_training_questions_are_held_out_of_evaluation():
    splits = [{"fraction": 0.3, "seed": 0}, {"fraction": 0.3, "seed": 1}]
    kept = set(held_out(IDS, splits))
    for split in splits:
        assert not kept.intersection(training_questions(IDS, split["fraction"], split["seed"]))


def test_an_entrys_split_is_its_fraction_and_seed():
    assert split_of({"train_fraction": 0.25, "split_seed": 3}) == {"fraction": 0.25, "seed": 3}
