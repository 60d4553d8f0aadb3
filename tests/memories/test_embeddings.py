from __future__ import annotations

import threading

import numpy as np

from memories import embeddings


def test_embed_texts_returns_one_normalised_384_vector_per_text():
    vectors = embeddings.embed_texts(["A walk by the river", "Grandma's apple pie", "Tax return filed"])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_related_texts_are_closer_than_unrelated_ones():
    dog, fetch, taxes = embeddings.embed_texts(
        [
            "My dog Rex loves chasing the ball in the park",
            "Rex the dog played fetch with a ball at the park",
            "I filed the quarterly tax return with the accountant",
        ]
    )
    assert float(dog @ fetch) > 0.5 > float(dog @ taxes)


def test_batched_encoding_matches_one_by_one():
    texts = [f"Memory {n} about the seaside and the gulls" for n in range(70)]  # more than one batch
    batched = embeddings.embed_texts(texts)
    one_by_one = np.array([embeddings.embed_text(text) for text in (texts[0], texts[65])], dtype=np.float32)
    np.testing.assert_allclose(batched[[0, 65]], one_by_one, atol=1e-5)


def test_embed_text_returns_a_plain_list_of_floats():
    vector = embeddings.embed_text("a query")
    assert isinstance(vector, list)
    assert len(vector) == 384
    assert all(isinstance(value, float) for value in vector)


def test_empty_input_needs_no_model_call():
    assert embeddings.embed_texts([]).shape == (0, 384)


def test_model_is_loaded_once_even_when_threads_ask_at_once(monkeypatch):
    monkeypatch.setattr(embeddings, "_model", None)
    loaded = []
    start = threading.Barrier(4)

    def load() -> None:
        start.wait()
        loaded.append(embeddings._load_model())

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loaded) == 4
    assert all(model is loaded[0] for model in loaded)
    assert embeddings.MODEL_NAME == "all-MiniLM-L6-v2"
