"""The ``transformers`` backend: a local model on CPU or GPU, for small models and CI.

Conversations become prompts through the tokenizer's chat template (Qwen3's
``enable_thinking`` passed when set). Requests that arrive while the model is
busy, from any number of concurrent callers, are queued and run together:
a single worker coroutine drains the queue, groups rows with the same
sampling settings, left-pads them into one batch (``n`` samples of a
conversation are ``n`` rows) and runs ``model.generate`` in a worker thread,
so the event loop stays free. Each row is cut at its first end-of-sequence
token (``finish_reason='stop'``) or at the first stop string, else it ran
out of ``max_new_tokens`` (``'length'``).

Seeds: with ``params.seed`` set, the batch's random generator is seeded with
the seed of its first conversation, so a rerun of the same batch gives the
same samples; rows of one batch do not get independent seeds.
"""
from __future__ import annotations

import asyncio
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from cobalt.engines._common import chat_prompt, conversation_seed, first_line
from cobalt.engines.base import ChatMessage, Completion, Engine, EngineError, SamplingParams


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    seed: int | None
    future: asyncio.Future = field(repr=False)


def _group_key(params: SamplingParams) -> tuple:
    return (float(params.temperature), float(params.top_p), params.max_new_tokens, params.stop)


class TransformersEngine(Engine):
    """A Hugging Face ``transformers`` causal LM that completes chats in batches."""

    name = "transformers"

    def __init__(
        self,
        model: str,
        *,
        device: str = "auto",
        dtype: str = "auto",
        max_batch_size: int = 64,
        batch_wait: float = 0.002,
        chat_template_kwargs: dict[str, Any] | None = None,
        cpu_threads: int | None = None,
    ) -> None:
        """``model``: a local folder (or a hub id already in the local cache).

        ``device``: ``auto`` (CUDA when available), ``cpu`` or ``cuda[:i]``;
        ``dtype``: ``auto`` (bfloat16 on GPU, float32 on CPU), ``float32``,
        ``bfloat16`` or ``float16``; ``max_batch_size``: rows (samples) per
        ``generate`` call; ``batch_wait``: seconds the worker waits for more
        requests after the first one arrives; ``cpu_threads``: when set and
        the model runs on CPU, ``torch.set_num_threads`` (process-wide) at load.
        """
        if not model:
            raise EngineError("transformers engine: no model given (--model PATH)")
        looks_like_path = model.startswith((".", "/", "~")) or os.sep in model and not _is_hub_id(model)
        if looks_like_path and not Path(model).expanduser().exists():
            raise EngineError(f"transformers engine: model path {model} does not exist")
        self.model = model
        self.device_name = device
        self.dtype_name = dtype
        self.max_batch_size = int(max_batch_size)
        self.batch_wait = float(batch_wait)
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.cpu_threads = cpu_threads
        self._load_lock = threading.Lock()
        self._model: Any = None
        self._tokenizer: Any = None
        self._device: Any = None
        self._queue: asyncio.Queue | None = None
        self._worker: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.batches_run = 0
        """How many ``generate`` calls ran (a measure of batching)."""
        self.running_batches = 0
        """``generate`` calls running now in the worker thread (0 or 1)."""

    def describe(self) -> dict:
        """Engine, model, device and dtype."""
        return {"engine": self.name, "model": self.model, "device": self.device_name, "dtype": self.dtype_name}

    # -- loading ----------------------------------------------------------------------------
    def load(self) -> None:
        """Load tokenizer and model (once; thread-safe). Raises :class:`EngineError` when it cannot."""
        with self._load_lock:
            if self._model is not None:
                return
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            device = self.device_name
            if device == "auto":
                device = "cuda" if torch.cuda.is_available() else "cpu"
            dtype_name = self.dtype_name
            if dtype_name == "auto":
                dtype_name = "bfloat16" if device.startswith("cuda") else "float32"
            if dtype_name not in ("float32", "bfloat16", "float16"):
                raise EngineError(f"transformers engine: unknown dtype {self.dtype_name!r}")
            path = str(Path(self.model).expanduser()) if Path(self.model).expanduser().exists() else self.model
            try:
                tokenizer = AutoTokenizer.from_pretrained(path)
                model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype_name))
            except (OSError, ValueError) as exc:
                raise EngineError(f"transformers engine: cannot load model {self.model}: {first_line(str(exc))}") from None
            tokenizer.padding_side = "left"
            if tokenizer.pad_token_id is None:
                tokenizer.pad_token = tokenizer.eos_token
            if self.cpu_threads and device == "cpu":
                torch.set_num_threads(int(self.cpu_threads))
            self._device = torch.device(device)
            self._model = model.to(self._device).eval()
            self._tokenizer = tokenizer

    @property
    def tokenizer(self) -> Any:
        """The loaded tokenizer (loads the model on first use)."""
        self.load()
        return self._tokenizer

    async def check(self) -> None:
        """Load the model now (in a thread), so a bad path fails before any output is written."""
        await asyncio.to_thread(self.load)

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (self._model.generation_config.eos_token_id, self._tokenizer.eos_token_id):
            if isinstance(source, int):
                ids.add(source)
            elif source:
                ids.update(int(x) for x in source)
        return ids

    # -- prompts ------------------------------------------------------------------------------
    def prompt_text(self, conversation: Sequence[ChatMessage], enable_thinking: bool | None) -> str:
        """The conversation rendered by the chat template, ending with the assistant's turn opener."""
        return chat_prompt(self.tokenizer, conversation, enable_thinking, self.chat_template_kwargs)

    def prompt_ids(self, conversation: Sequence[ChatMessage], enable_thinking: bool | None) -> list[int]:
        """Token ids of :meth:`prompt_text` (the template already holds the special tokens)."""
        return list(self.tokenizer(self.prompt_text(conversation, enable_thinking), add_special_tokens=False)["input_ids"])

    # -- the batch worker ---------------------------------------------------------------------------
    def _ensure_worker(self) -> asyncio.Queue:
        loop = asyncio.get_running_loop()
        if self._queue is None or self._loop is not loop or self._worker is None or self._worker.done():
            self._queue = asyncio.Queue()
            self._loop = loop
            self._worker = loop.create_task(self._work(self._queue), name="transformers-engine-batcher")
        return self._queue

    async def _work(self, queue: asyncio.Queue) -> None:
        while True:
            pending = [await queue.get()]
            if self.batch_wait > 0:
                await asyncio.sleep(self.batch_wait)
            while not queue.empty():
                pending.append(queue.get_nowait())
            groups: dict[tuple, list[_Request]] = {}
            for req in pending:
                if not req.future.done():
                    groups.setdefault(_group_key(req.params), []).append(req)
            for reqs in groups.values():
                for chunk in self._chunks(reqs):
                    self.running_batches += 1
                    try:
                        results = await asyncio.to_thread(self._generate_batch, chunk)
                    except Exception as exc:  # noqa: BLE001 - handed to the callers
                        error = EngineError(f"transformers engine: generation failed: {first_line(f'{type(exc).__name__}: {exc}')}")
                        for req in chunk:
                            if not req.future.done():
                                req.future.set_exception(error)
                        continue
                    finally:
                        self.running_batches -= 1
                    for req, res in zip(chunk, results):
                        if not req.future.done():
                            req.future.set_result(res)

    def _chunks(self, reqs: list[_Request]) -> list[list[_Request]]:
        chunks: list[list[_Request]] = [[]]
        rows = 0
        for req in reqs:
            if chunks[-1] and rows + req.params.n > self.max_batch_size:
                chunks.append([])
                rows = 0
            chunks[-1].append(req)
            rows += req.params.n
        return chunks

    def _generate_batch(self, reqs: list[_Request]) -> list[list[Completion]]:
        """Run one ``generate`` over all rows of ``reqs`` (same sampling settings); in a worker thread."""
        import torch

        params = reqs[0].params
        rows = [req.prompt_ids for req in reqs for _ in range(req.params.n)]
        width = max(len(r) for r in rows)
        pad = self._tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=self._device)
        attention = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=self._device)
        kwargs: dict[str, Any] = {"max_new_tokens": params.max_new_tokens, "pad_token_id": pad,
                                  "eos_token_id": sorted(self._eos_ids())}
        if params.temperature > 0:
            kwargs.update(do_sample=True, temperature=float(params.temperature), top_p=float(params.top_p), top_k=0)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if params.stop:
            kwargs.update(stop_strings=list(params.stop), tokenizer=self._tokenizer)
        seed = next((r.seed for r in reqs if r.seed is not None), None)
        cuda = [self._device.index or 0] if self._device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):
            if seed is not None:
                torch.manual_seed(seed)
            with torch.inference_mode():
                out = self._model.generate(input_ids=input_ids, attention_mask=attention, **kwargs)
        self.batches_run += 1
        new_tokens = out[:, width:].tolist()
        results: list[list[Completion]] = []
        row = 0
        for req in reqs:
            samples = []
            for _ in range(req.params.n):
                samples.append(self.finish_row(new_tokens[row], len(req.prompt_ids), params))
                row += 1
            results.append(samples)
        return results

    def finish_row(self, tokens: Sequence[int], prompt_tokens: int, params: SamplingParams) -> Completion:
        """Turn one row of generated ids into a :class:`Completion`.

        The row ends at its first end-of-sequence token (counted, as vLLM and
        OpenAI do, and not shown) or where a stop string first appears (text
        cut before it); otherwise it hit ``max_new_tokens``.
        """
        eos = self._eos_ids()
        tokens = list(tokens)
        end = next((i for i, t in enumerate(tokens) if t in eos), None)
        if end is not None:
            tokens, counted, finish = tokens[:end], end + 1, "stop"
        else:
            # A row shorter than the budget was ended by a stop string (HF checks them on tokens).
            counted = len(tokens)
            finish = "length" if counted >= params.max_new_tokens else "stop"
        text = self._tokenizer.decode(tokens, skip_special_tokens=True)
        if params.stop:
            cut = min((text.find(s) for s in params.stop if s in text), default=-1)
            if cut >= 0:
                text, finish = text[:cut], "stop"
                counted = self._tokens_until_stop(tokens, params.stop)
        return Completion(text=text, prompt_tokens=prompt_tokens, completion_tokens=counted, finish_reason=finish)

    def _tokens_until_stop(self, tokens: list[int], stops: Sequence[str]) -> int:
        """Fewest leading tokens whose text contains a stop string (binary search on decode)."""
        lo, hi = 1, len(tokens)
        while lo < hi:
            mid = (lo + hi) // 2
            text = self._tokenizer.decode(tokens[:mid], skip_special_tokens=True)
            if any(s in text for s in stops):
                hi = mid
            else:
                lo = mid + 1
        return lo

    # -- the interface -------------------------------------------------------------------------------
    async def generate(self, conversations: Sequence[Sequence[ChatMessage]], params: SamplingParams) -> list[list[Completion]]:
        """``params.n`` completions per conversation, batched with whatever else is waiting."""
        if not conversations:
            return []
        if self._model is None:
            await asyncio.to_thread(self.load)
        queue = self._ensure_worker()
        loop = asyncio.get_running_loop()
        futures = []
        for i, conv in enumerate(conversations):
            fut = loop.create_future()
            queue.put_nowait(_Request(self.prompt_ids(conv, params.enable_thinking), params,
                                      conversation_seed(params, i), fut))
            futures.append(fut)
        try:
            return list(await asyncio.gather(*futures))
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise

    async def stop_batching(self) -> None:
        """Stop the batch worker (the model stays loaded; the next ``generate`` starts a new one)."""
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
            self._worker = None

    async def aclose(self) -> None:
        """Stop the batch worker and drop the model."""
        await self.stop_batching()
        self._model = None
        self._tokenizer = None


def _is_hub_id(model: str) -> bool:
    parts = model.split("/")
    return len(parts) == 2 and all(parts) and not model.startswith((".", "/", "~"))


def create(model: str, **options: Any) -> TransformersEngine:
    """Factory registered as engine ``transformers``."""
    return TransformersEngine(model, **options)
