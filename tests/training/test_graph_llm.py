"""RAS's Graph LLM: graphs from triples, pooling, label masking (no model), and, on the
bundled SmolLM2 (integration), training, the graph token's effect and save/load."""

import json
import shutil

import numpy as np
import pytest
import torch

from kgrag.errors import KgragError
from kgrag.training.graph_llm.encoder import GraphEncoder, batch_of, graph_of, pool, texts_of
from kgrag.training.graph_llm.model import (
    IGNORE,
    MANIFEST,
    GraphLLM,
    GraphLLMSettings,
    Sample,
    label_sequence,
)
from kgrag.training.graph_llm.train import train_graph_llm


def test_a_graph_has_unique_nodes_and_a_reverse_edge_per_fact():
    g = graph_of([("Paris", "capital of", "France"), ("France", "in", "Europe"),
                  ("Paris", "capital of", "France")])
    assert g.nodes == ("Paris", "France", "Europe")
    assert g.edges == ((0, 1), (1, 0), (1, 2), (2, 1))
    assert g.relations == ("capital of", "inverse_capital of", "in", "inverse_in")
    assert texts_of([g, graph_of([("Paris", "in", "Europe")])]) == [
        "Paris", "France", "Europe", "capital of", "inverse_capital of", "in", "inverse_in"]


def test_pooling_averages_subgraph_means_and_gives_zero_without_a_graph():
    small, large = graph_of([("a", "r", "b")]), graph_of([("c", "r", "d"), ("d", "r", "e")])
    rows = {t: i for i, t in enumerate(texts_of([small, large]))}
    batch = batch_of([[small, large], [], [graph_of([])], [large]], rows)
    assert batch.samples == 4 and batch.graph_sample.tolist() == [0, 0, 3]
    # node states 0..7 in batch order: small (0, 1), large (2, 3, 4), large again (5, 6, 7)
    states = torch.arange(8, dtype=torch.float32).unsqueeze(1)
    pooled = pool(states, batch)[:, 0].tolist()
    assert pooled == [(0.5 + 3.0) / 2, 0.0, 0.0, 6.0]  # a mean of means, not of nodes


def test_the_encoder_gives_one_token_per_sample_and_the_projected_zero_without_a_graph():
    torch.manual_seed(0)
    g = graph_of([("a", "r", "b"), ("b", "s", "c")])
    rows = {t: i for i, t in enumerate(texts_of([g]))}
    encoder = GraphEncoder(features=4, hidden=16, layers=3, heads=8, dropout=0.0, out=6).eval()
    table = torch.randn(len(rows), 4)
    tokens = encoder(batch_of([[g], [], [g, g]], rows), table)
    assert tokens.shape == (3, 6)
    assert torch.allclose(tokens[1], encoder.projector(torch.zeros(16)))
    assert torch.allclose(tokens[0], tokens[2], atol=1e-6)  # the same graph twice: same mean
    assert not torch.allclose(tokens[0], tokens[1])


def test_only_the_target_is_labelled_and_the_soft_token_takes_its_slot():
    ids, labels = label_sequence([1, 7, 8, 9], [42, 43, 2], soft_at=1)
    assert ids == [1, 0, 7, 8, 9, 42, 43, 2]
    assert labels == [IGNORE] * 5 + [42, 43, 2]
    assert label_sequence([7, 8], [5], soft_at=0) == ([0, 7, 8, 5], [IGNORE] * 3 + [5])


def test_a_folder_trained_on_another_base_or_no_folder_is_refused(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / MANIFEST).write_text(json.dumps({"base_sha256": "0" * 64,
                                               "base_file": "base.gguf"}))
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF not the base")
    with pytest.raises(KgragError, match="trained on base.gguf"):
        GraphLLM.load(folder, other, embed=lambda texts: None)
    with pytest.raises(KgragError, match="holds no trained Graph LLM"):
        GraphLLM.load(tmp_path / "missing", other, embed=lambda texts: None)


# --- on the bundled SmolLM2-135M (its GGUF dequantized into transformers) ---------------

PROMPT = "Which city does the graph name? Answer with the city only."
TINY = GraphLLMSettings(hidden=32, heads=4, layers=2, dropout=0.0, lora_dropout=0.0,
                        learning_rate=2e-3, encoder_learning_rate=3e-2, epochs=20,
                        batch_size=2, grad_accumulation=1, warmup_ratio=0.0,
                        max_input_tokens=96, max_target_tokens=8)


def _embed(texts):
    """A deterministic stand-in embedder (8-d bag of character codes, unit length): the
    Graph LLM takes any embedding function; the real one is tested in kgrag.models."""
    out = np.zeros((len(texts), 8), dtype=np.float32)
    for i, text in enumerate(texts):
        for j, ch in enumerate(text):
            out[i, (ord(ch) + j) % 8] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-6)


def _base():
    from kgrag.models.registry import resolve_llm

    return resolve_llm("smollm2-135m").path


@pytest.mark.integration
def test_the_dequantized_model_predicts_what_llama_cpp_predicts():
    from llama_cpp import Llama

    from kgrag.training.gguf_llm import load_causal_lm, load_tokenizer

    path = _base()
    tokenizer = load_tokenizer(path)
    before, after = tokenizer.wrap()
    ids = before + tokenizer.encode("What is the capital of France?") + after
    with torch.no_grad():
        ours = load_causal_lm(path)(torch.tensor([ids])).logits[0].numpy()
    reference = Llama(model_path=str(path), logits_all=True, n_ctx=256, verbose=False)
    reference.eval(ids)
    theirs = np.array(reference.scores[:len(ids)])
    # llama.cpp multiplies with quantized activations, so a near-tie may flip; a wrong
    # tensor mapping or q/k permutation agrees on almost nothing
    assert (ours.argmax(-1) == theirs.argmax(-1)).mean() > 0.85


@pytest.mark.integration
def test_training_lowers_the_loss_and_the_same_seed_repeats_it(tmp_path):
    samples = [Sample(PROMPT, "Paris", [[("France", "capital", "Paris")]]),
               Sample("Is more retrieval needed?", "[SUFFICIENT]", [])]
    settings = GraphLLMSettings(**{**TINY.__dict__, "epochs": 4})
    first = train_graph_llm(samples, settings, _base(), _embed, tmp_path / "a", threads=1)
    second = train_graph_llm(samples, settings, _base(), _embed, tmp_path / "b", threads=1)
    losses = [r["loss"] for r in first["steps"]]
    assert len(losses) == 4 and losses[-1] < losses[0]
    assert losses == [r["loss"] for r in second["steps"]]
    assert first["samples"] == 2 and first["target_tokens"] > 2 and first["peak_rss_mb"] > 0


@pytest.mark.integration
def test_the_unpadded_target_loss_is_the_padded_batch_loss_and_its_gradient():
    from kgrag.training.graph_llm.model import build_parts

    parts = build_parts(_base(), _embed, TINY, 8)
    samples = [Sample(PROMPT + " Think of France, its capital and the Seine.", "Paris",
                      [[("France", "capital", "Paris")]]),
               Sample("Is more retrieval needed?", "[SUFFICIENT]", [])]
    batch = [parts.encode(s) for s in samples]
    assert len(batch[0].ids) != len(batch[1].ids)  # the batched forward pads one of them
    table, rows = parts.features([g for e in batch for g in e.graphs])
    lora = [p for p in parts.llm.parameters() if p.requires_grad]

    def loss_and_grads(loss):
        grads = torch.autograd.grad(loss, lora)
        return float(loss), torch.cat([g.flatten() for g in grads])

    embeds, mask, labels = parts.embeddings(batch, table, rows)
    padded = loss_and_grads(parts.llm(inputs_embeds=embeds, attention_mask=mask,
                                      labels=labels).loss)
    ours = loss_and_grads(parts.target_loss(batch, table, rows))
    assert ours[0] == pytest.approx(padded[0], abs=1e-4)
    # float32 sums in another order: the gradients agree to well under a part in a thousand
    assert float((ours[1] - padded[1]).norm() / padded[1].norm()) < 1e-3
    assert float(padded[1].norm()) > 0  # the gradients compared are not all zero


@pytest.mark.integration
@pytest.mark.xfail(strict=True, reason="known shortfall: on SmolLM2-135M the two identical "
                   "prompts plateau at the 50/50 prior (loss ln 2 per answer token) and both "
                   "graphs give the same city (docs/results.md, \"RAS on HotpotQA\")")
def test_the_graph_token_decides_the_answer(tmp_path):
    paris = [[("France", "capital", "Paris")]]
    rome = [[("Italy", "capital", "Rome")]]
    samples = [Sample(PROMPT, "Paris", paris), Sample(PROMPT, "Rome", rome)]
    train_graph_llm(samples, TINY, _base(), _embed, tmp_path / "model", threads=1)
    model = GraphLLM.load(tmp_path / "model", _base(), _embed, threads=1)
    answers = [model.generate(PROMPT, g, max_new_tokens=4) for g in (paris, rome)]
    assert answers == ["Paris", "Rome"]  # the prompts are identical: only the graph differs


@pytest.mark.integration
def test_a_saved_model_loads_anywhere_and_generates_the_same(tmp_path):
    samples = [Sample(PROMPT, "Paris", [[("France", "capital", "Paris")]]),
               Sample("Is more retrieval needed?", "[SUFFICIENT]", [])]
    settings = GraphLLMSettings(**{**TINY.__dict__, "epochs": 6})
    train_graph_llm(samples, settings, _base(), _embed, tmp_path / "model", threads=1)
    shutil.copytree(tmp_path / "model", tmp_path / "moved")
    first = GraphLLM.load(tmp_path / "model", _base(), _embed, threads=1)
    moved = GraphLLM.load(tmp_path / "moved", _base(), _embed, threads=1)
    for s in samples:
        assert moved.generate(s.prompt, s.subgraphs, 6) == first.generate(
            s.prompt, s.subgraphs, 6)
    assert first.base_sha256 == json.loads((tmp_path / "moved" / MANIFEST).read_text())[
        "base_sha256"]
