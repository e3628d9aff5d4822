"""FinetunePairEncoder: one packed pass gives the same pair vectors as encoding each
(history, reply) alone, for BERT and for a RoBERTa-style model (type widening, position offset)."""

from __future__ import annotations

import pytest
import torch

from enigma.dialogue import Turn
from enigma.encoders.base import DialogueActions
from enigma.encoders.finetune import FinetunePairEncoder
from enigma.encoders.packing import PackingError

DIALOGUES = [
    DialogueActions(
        "d1",
        (
            Turn("user", "hello how can i help you today"),
            Turn("agent", "i want to book a flight to boston"),
            Turn("user", "sure which day do you want to fly"),
            Turn("agent", "next monday in the morning please"),
            Turn("user", "ok"),
        ),
        (1, 3),
        (("sorry no cheaper flight", "ok book it thanks bye"), ("there is a flight at nine", "that is too expensive")),
    ),
    DialogueActions(
        "d2",  # starts with the agent; shorter, so the batch is padded
        (Turn("agent", "hello how can i help you"), Turn("user", "book a flight"), Turn("agent", "which day")),
        (0, 2),
        (("hello", "hi there"), ("monday", "sure which day do you want")),
    ),
]


def _tiny_roberta(tokenizer):
    from transformers import RobertaConfig, RobertaModel

    torch.manual_seed(1)
    config = RobertaConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=130, type_vocab_size=1, pad_token_id=tokenizer.pad_token_id,
    )
    return RobertaModel(config, add_pooling_layer=False).eval()


def _tiny_mpnet(tokenizer):
    from transformers import MPNetConfig, MPNetModel

    torch.manual_seed(2)
    config = MPNetConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=130, pad_token_id=tokenizer.pad_token_id,
    )
    model = MPNetModel(config, add_pooling_layer=False).eval()
    with torch.no_grad():  # make the relative bias matter, so a wrong one shows
        model.encoder.relative_attention_bias.weight.normal_(0, 2.0)
    return model


def _reference_vector(enc: FinetunePairEncoder, history: list[Turn], reply: str) -> torch.Tensor:
    """Encode (history, reply) alone: ordinary positions, no other branch, block-causal mask."""
    tok = enc.tokenizer
    ids, types, seg = [enc.cls_id], [0], [0]
    for n, turn in enumerate([*history, Turn("agent", reply)], start=1):
        body = tok(turn.text, add_special_tokens=False)["input_ids"][: enc.max_utterance_tokens] + [enc.sep_id]
        ids += body
        types += [1 if turn.role == "agent" else 0] * len(body)
        seg += [n] * len(body)
    seg_t = torch.tensor(seg)
    mask = (seg_t.unsqueeze(0) <= seg_t.unsqueeze(1))[None, None]  # key segment <= query segment
    kwargs = {
        "input_ids": torch.tensor([ids]),
        "position_ids": torch.arange(len(ids))[None] + enc.position_offset,
        "attention_mask": mask,
    }
    if enc.use_token_type_ids:
        kwargs["token_type_ids"] = torch.tensor([types])
    else:  # a model without type embeddings: the encoder's own added table
        kwargs["inputs_embeds"] = enc.model.get_input_embeddings()(kwargs.pop("input_ids")) + enc.extra_type_embedding(torch.tensor([types]))
    if enc.model.config._attn_implementation == "eager":
        kwargs["attention_mask"] = torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)
    with torch.no_grad():
        return enc.model(**kwargs).last_hidden_state[0, -1]


@pytest.fixture(params=["bert", "roberta", "mpnet"])
def encoder(request, tiny_bert, tiny_tokenizer):
    model = {"bert": lambda: tiny_bert, "roberta": lambda: _tiny_roberta(tiny_tokenizer), "mpnet": lambda: _tiny_mpnet(tiny_tokenizer)}
    enc = FinetunePairEncoder(model[request.param](), tokenizer=tiny_tokenizer)
    if request.param == "mpnet":
        assert not enc.use_token_type_ids and enc.extra_type_embedding is not None
        with torch.no_grad():  # zero-initialised; give it values so a type bug shows
            enc.extra_type_embedding.weight.normal_(0, 1.0)
    return enc


def test_packed_vectors_equal_separate_encoding(encoder):
    prepared = encoder.prepare(DIALOGUES, max_agent_turns=3)
    with torch.no_grad():
        logged, target = encoder(prepared, torch.tensor([0, 1]))
    assert logged.shape == (2, 3, encoder.dim) and target.shape == (2, 3, 2, encoder.dim)
    for b, d in enumerate(DIALOGUES):
        for k, t in enumerate(d.agent_turns):
            history = list(d.turns[:t])
            ref = _reference_vector(encoder, history, d.turns[t].text)
            torch.testing.assert_close(logged[b, k], ref, atol=1e-5, rtol=1e-4)
            for s, reply in enumerate(d.target_replies[k]):
                ref = _reference_vector(encoder, history, reply)
                torch.testing.assert_close(target[b, k, s], ref, atol=1e-5, rtol=1e-4)
        # slots past the dialogue's last agent turn are zeros
        assert not logged[b, len(d.agent_turns):].any() and not target[b, len(d.agent_turns):].any()


def test_a_deep_copy_of_mpnet_uses_its_own_weights(tiny_tokenizer):
    """The trainer deep-copies the encoder for weight averaging: the copy's position bias must
    be the copy's, not the original's."""
    import copy

    enc = FinetunePairEncoder(_tiny_mpnet(tiny_tokenizer), tokenizer=tiny_tokenizer)
    twin = copy.deepcopy(enc)
    assert twin.model.encoder.compute_position_bias.__self__ is twin.model.encoder
    prepared = enc.prepare(DIALOGUES, 3)
    with torch.no_grad():
        twin.model.encoder.relative_attention_bias.weight.mul_(3.0)
        before, _ = enc(prepared, torch.tensor([0]))
        changed, _ = twin(prepared, torch.tensor([0]))
        again, _ = enc(prepared, torch.tensor([0]))
    torch.testing.assert_close(before, again)
    assert not torch.allclose(before, changed)


def test_the_reference_check_can_fail(tiny_bert, tiny_tokenizer):
    """Sanity for the test above: letting a target see the logged reply changes its vector."""
    enc = FinetunePairEncoder(tiny_bert, tokenizer=tiny_tokenizer)
    d = DIALOGUES[0]
    with torch.no_grad():
        _, target = enc(enc.prepare([d], 2), torch.tensor([0]))
    leaked = _reference_vector(enc, list(d.turns[:2]), d.target_replies[0][0])  # history includes the logged reply
    assert not torch.allclose(target[0, 0, 0], leaked, atol=1e-3)


def test_single_type_vocabulary_is_widened_by_copy(tiny_tokenizer):
    model = _tiny_roberta(tiny_tokenizer)
    original = model.embeddings.token_type_embeddings.weight[0].detach().clone()
    enc = FinetunePairEncoder(model, tokenizer=tiny_tokenizer)
    table = enc.model.embeddings.token_type_embeddings.weight
    assert table.shape[0] == 2 and enc.model.config.type_vocab_size == 2
    torch.testing.assert_close(table[0], original)
    torch.testing.assert_close(table[1], original)
    assert enc.position_offset == tiny_tokenizer.pad_token_id + 1


def test_gradients_reach_the_encoder_and_dropout_is_off(tiny_bert, tiny_tokenizer):
    enc = FinetunePairEncoder(tiny_bert, tokenizer=tiny_tokenizer).train()
    assert all(m.p == 0.0 for m in enc.modules() if isinstance(m, torch.nn.Dropout))
    prepared = enc.prepare(DIALOGUES, 2)
    logged, target = enc(prepared, torch.tensor([1, 0]))
    logged2, _ = enc(prepared, torch.tensor([1, 0]))
    torch.testing.assert_close(logged, logged2)  # deterministic in train mode
    (logged.sum() + target.square().sum()).backward()
    grad = enc.model.embeddings.word_embeddings.weight.grad
    assert grad is not None and grad.abs().sum() > 0


def test_missing_samples_are_zero_and_turn_limits_named(tiny_bert, tiny_tokenizer):
    enc = FinetunePairEncoder(tiny_bert, tokenizer=tiny_tokenizer)
    fewer = DialogueActions("fewer", DIALOGUES[1].turns, (0, 2), (("hello", "hi there"), ("monday",)))
    prepared = enc.prepare([DIALOGUES[0], fewer], 3)
    assert prepared.n_samples == 2
    with torch.no_grad():
        _, target = enc(prepared, torch.tensor([1]))
    assert not target[0, 1, 1].any() and target[0, 1, 0].abs().sum() > 0
    torch.testing.assert_close(target[0, 1, 0], _reference_vector(enc, list(fewer.turns[:2]), "monday"), atol=1e-5, rtol=1e-4)
    with pytest.raises(PackingError, match="dialogue d1: 2 agent turns, more than max_agent_turns=1"):
        enc.prepare([DIALOGUES[0]], 1)
    bad = DialogueActions("bad", DIALOGUES[1].turns, (0, 2), (("a",),))
    with pytest.raises(PackingError, match="dialogue bad: 2 agent turns but target replies for 1"):
        enc.prepare([bad], 3)


def test_long_dialogue_is_truncated_to_the_position_limit(tiny_bert, tiny_tokenizer):
    enc = FinetunePairEncoder(tiny_bert, tokenizer=tiny_tokenizer, max_utterance_tokens=32)
    long_text = " ".join(["flight to boston"] * 20)
    turns = tuple(Turn("user" if i % 2 == 0 else "agent", long_text) for i in range(8))
    d = DialogueActions("long", turns, (1, 3, 5, 7), tuple((long_text,) for _ in range(4)))
    prepared = enc.prepare([d], 4)
    pack = prepared.packs[0]
    assert pack.n_positions <= enc.max_positions < 1 + 8 * 33 and pack.cap < 32
    logged, _ = enc(prepared, torch.tensor([0]))
    assert torch.isfinite(logged).all()


@pytest.mark.slow
def test_real_minilm_packed_equals_separate():
    torch.set_num_threads(1)
    enc = FinetunePairEncoder("minilm")
    prepared = enc.prepare(DIALOGUES[:1], 2)
    with torch.no_grad():
        logged, target = enc(prepared, torch.tensor([0]))
    d = DIALOGUES[0]
    torch.testing.assert_close(target[0, 1, 1], _reference_vector(enc, list(d.turns[:3]), d.target_replies[1][1]), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(logged[0, 1], _reference_vector(enc, list(d.turns[:3]), d.turns[3].text), atol=1e-4, rtol=1e-4)
