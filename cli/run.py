"""`llamay run MODEL [PROMPT]`: generate text, streamed as it is made, or chat."""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from collections.abc import Iterator

import click

import llamay
from llamay.engine import Context, Model
from llamay.engine.generate import Generation, chat_prompt_ids
from llamay.engine.sampling import Sampler, SamplingParams
from llamay.errors import ContextOverflow, LlamayError

_DEFAULTS = SamplingParams()


@click.command()
@click.argument("model")
@click.argument("prompt", required=False)
@click.option(
    "-n",
    "--n-predict",
    "max_tokens",
    type=click.IntRange(min=0),
    help="Generate at most N tokens. [default: until the model ends its turn or the context is full]",
)
@click.option(
    "--temp",
    "temperature",
    type=click.FloatRange(min=0),
    default=_DEFAULTS.temperature,
    show_default=True,
    help="Sampling temperature; 0 is greedy (the same text on every run).",
)
@click.option(
    "--top-k",
    type=click.IntRange(min=0),
    default=_DEFAULTS.top_k,
    show_default=True,
    help="Keep the K most likely tokens (0: all).",
)
@click.option(
    "--top-p",
    type=click.FloatRange(0, 1, min_open=True),
    default=_DEFAULTS.top_p,
    show_default=True,
    help="Keep the most likely tokens that together reach probability P (1: all).",
)
@click.option(
    "--min-p",
    type=click.FloatRange(0, 1),
    default=_DEFAULTS.min_p,
    show_default=True,
    help="Keep tokens at least P times as likely as the most likely one (0: all).",
)
@click.option(
    "--seed", type=int, help="Seed of the sampler. [default: a fresh one, shown in the stats]"
)
@click.option("--threads", type=click.IntRange(min=1), help="CPU threads. [default: all cores]")
@click.option(
    "-c",
    "--ctx-size",
    "n_ctx",
    type=click.IntRange(min=1),
    help="Context size in tokens. [default: 4096, or the training context if smaller]",
)
@click.option("--raw", is_flag=True, help="No chat template: BOS + PROMPT, special tokens parsed.")
@click.option("--system", help="A system message for the chat template.")
def run(
    model: str,
    prompt: str | None,
    max_tokens: int | None,
    temperature: float,
    top_k: int,
    top_p: float,
    min_p: float,
    seed: int | None,
    threads: int | None,
    n_ctx: int | None,
    raw: bool,
    system: str | None,
) -> None:
    """Generate a continuation of PROMPT, or chat with MODEL when no PROMPT is given.

    With PROMPT only the generated text goes to stdout, as it is made; the token counts and speeds
    go to stderr. The prompt goes through the model's chat template (with --system as the system
    message) unless --raw is given. Sampling follows llama.cpp's chain and defaults: top-k, top-p,
    min-p, then temperature.

    Without PROMPT: a conversation. Each line you type is a turn; Ctrl-C stops an answer,
    /bye or Ctrl-D ends the session. /fork continues in a copy-on-write fork of the conversation
    (/back returns to where it forked), /save FILE and /load FILE write and read a snapshot of
    the conversation and its KV state, /reset clears it.
    """
    if raw and system is not None:
        raise click.UsageError("--system needs the chat template; drop --raw")
    if raw and prompt is None:
        raise click.UsageError("--raw needs a PROMPT (a chat goes through the chat template)")
    params = SamplingParams(temperature, top_k, top_p, min_p, seed)
    loaded = llamay.load(model, threads=threads, n_ctx=n_ctx)
    try:
        if prompt is None:
            Chat(loaded, params, max_tokens, system).loop()
            return
        if raw:
            ids = loaded.tokenize(prompt, add_bos=True, special=True)
        else:
            rendered = loaded.chat_template.render(_messages(system, prompt))
            ids = chat_prompt_ids(loaded, rendered)
        _complete(loaded, ids, Sampler(params), max_tokens)
    finally:
        loaded.close()


# --- one prompt ----------------------------------------------------------------------------------


def _complete(model: Model, ids: list[int], sampler: Sampler, max_tokens: int | None) -> None:
    _check_fits(model, len(ids), "the prompt")
    context = model.context()
    generation = Generation(model, context, sampler, max_tokens)
    with _ctrl_c_cancels(generation):
        started = time.perf_counter()
        context.feed(ids)
        prefilled = time.perf_counter()
        _stream(model, generation)
        finished = time.perf_counter()
    context.close()
    stats = (
        f"prompt {len(ids)} tokens ({_rate(len(ids), prefilled - started)}), "
        f"generated {generation.n_generated} tokens "
        f"({_rate(generation.n_generated, finished - prefilled)}), "
        f"finish: {generation.finish_reason}"
    )
    if not sampler.params.greedy:
        stats += f", seed {sampler.seed}"
    # On a terminal the stats start a line of their own (the text need not end one).
    click.echo(("\n" if sys.stderr.isatty() else "") + stats, err=True)
    if generation.finish_reason == "cancelled":
        sys.exit(130)


def _rate(tokens: int, seconds: float) -> str:
    return f"{tokens / seconds:.1f} t/s" if tokens and seconds > 0 else "-"


def _messages(system: str | None, *user: str) -> list[dict[str, str]]:
    head = [{"role": "system", "content": system}] if system is not None else []
    return head + [{"role": "user", "content": text} for text in user]


def _check_fits(model: Model, n_tokens: int, what: str) -> None:
    """Refuse input that leaves no room for a single generated token."""
    if n_tokens >= model.n_ctx:
        raise ContextOverflow(
            f"{what} is {n_tokens} tokens but the context holds {model.n_ctx}, leaving no room "
            "to generate: shorten it or raise -c"
        )


def _stream(model: Model, generation: Generation) -> str:
    """Print the generation's text as it comes; returns all of it."""
    decoder = model.tokenizer.stream()
    pieces = []
    for token in generation:
        pieces.append(decoder.feed(token))
        sys.stdout.write(pieces[-1])
        sys.stdout.flush()
    pieces.append(decoder.flush())
    sys.stdout.write(pieces[-1])
    sys.stdout.flush()
    return "".join(pieces)


@contextlib.contextmanager
def _ctrl_c_cancels(generation: Generation) -> Iterator[None]:
    """Ctrl-C ends the generation between two tokens, leaving its context whole."""
    previous = signal.signal(signal.SIGINT, lambda signum, frame: generation.cancel())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


# --- a conversation ------------------------------------------------------------------------------


class Chat:
    """A multi-turn conversation over one context.

    Each turn renders the whole conversation through the chat template and feeds only the text
    beyond what the context already holds. A template may rewrite earlier turns (trim an answer,
    drop its reasoning); then the context no longer matches the rendering and is rebuilt from it.
    """

    def __init__(
        self, model: Model, params: SamplingParams, max_tokens: int | None, system: str | None
    ):
        self.model = model
        self.sampler = Sampler(params)
        self.max_tokens = max_tokens
        self.messages = _messages(system)
        self.context = model.context()
        self.held = ""  # the text the context's tokens stand for
        self.generation: Generation | None = None  # the answer being made
        self.reading = False  # waiting in input()
        # Conversations set aside by /fork, newest last: (context, messages, held).
        self.branches: list[tuple[Context, list[dict[str, str]], str]] = []

    def loop(self) -> None:
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (line editing and history for input())
        prompt = ">>> " if sys.stdin.isatty() else ""
        previous = signal.signal(signal.SIGINT, self._on_ctrl_c)
        try:
            while (line := self._read(prompt)) is not None:
                if line.strip().startswith("/"):
                    self.command(line.strip())
                elif line.strip():
                    self.turn(line)
        finally:
            signal.signal(signal.SIGINT, previous)
            for context, _, _ in self.branches:
                context.close()
            self.context.close()

    def _read(self, prompt: str) -> str | None:
        """The next line typed, or None at the end of input or /bye."""
        while True:
            self.reading = True
            try:
                line = input(prompt)
            except EOFError:
                return None
            except KeyboardInterrupt:
                click.echo("\n(/bye or Ctrl-D to leave)", err=True)
                continue
            finally:
                self.reading = False
            return None if line.strip() == "/bye" else line

    def _on_ctrl_c(self, signum: int, frame: object) -> None:
        # At the prompt, interrupt input(); otherwise stop the answer between two tokens, so the
        # context is never left half-fed.
        if self.reading:
            raise KeyboardInterrupt
        if self.generation is not None:
            self.generation.cancel()

    def command(self, line: str) -> None:
        """The chat's slash commands; each says on stderr what it did."""
        name, _, argument = line.partition(" ")
        argument = argument.strip()
        if name == "/reset":
            self._replace(self.model.context(), self.messages[: self._n_system()], "")
            click.echo("(the conversation is cleared)", err=True)
        elif name == "/fork":
            # The fork shares every page with the conversation it leaves (copy-on-write).
            self.branches.append((self.context, list(self.messages), self.held))
            self.context = self.context.fork()
            click.echo(
                f"(forked: /back returns to the conversation before, {len(self.branches)} kept)",
                err=True,
            )
        elif name == "/back":
            if not self.branches:
                click.echo("(no fork to go back to)", err=True)
                return
            self.context.close()
            self.context, self.messages, self.held = self.branches.pop()
            click.echo("(back to the conversation before the last /fork)", err=True)
        elif name == "/save" and argument:
            try:
                self.context.save(argument, note={"messages": self.messages, "held": self.held})
            except (LlamayError, OSError) as exc:
                click.echo(f"error: {exc}", err=True)
                return
            click.echo(f"(saved {self.context.n_tokens} tokens to {argument})", err=True)
        elif name == "/load" and argument:
            try:
                context = self.model.restore(argument)
            except (LlamayError, OSError) as exc:
                click.echo(f"error: {exc}", err=True)
                return
            note = context.note or {}
            self._replace(context, list(note.get("messages", [])), str(note.get("held", "")))
            click.echo(f"(loaded {context.n_tokens} tokens from {argument})", err=True)
        else:
            click.echo("commands: /fork, /back, /save FILE, /load FILE, /reset, /bye", err=True)

    def _n_system(self) -> int:
        return 1 if self.messages and self.messages[0]["role"] == "system" else 0

    def _replace(self, context: Context, messages: list[dict[str, str]], held: str) -> None:
        self.context.close()
        self.context, self.messages, self.held = context, messages, held

    def turn(self, text: str) -> None:
        """Answer one user message, streaming the answer to stdout."""
        self.messages.append({"role": "user", "content": text})
        rendered = self.model.chat_template.render(self.messages, add_generation_prompt=True)
        ids = self._ids_to_feed(rendered)
        self.generation = Generation(self.model, self.context, self.sampler, self.max_tokens)
        self.context.feed(ids)
        answer = _stream(self.model, self.generation)
        click.echo()
        self.held = rendered + answer
        self.messages.append({"role": "assistant", "content": answer})

    def _ids_to_feed(self, rendered: str) -> list[int]:
        """The tokens that take the context from what it holds to `rendered` (after making it a
        fresh context if what it holds is not a prefix of `rendered`)."""
        if self.context.tokens and rendered.startswith(self.held):
            ids = self.model.tokenize(rendered[len(self.held) :], add_bos=False, special=True)
            _check_fits(self.model, len(self.context.tokens) + len(ids), "the conversation")
            return ids
        ids = chat_prompt_ids(self.model, rendered)
        _check_fits(self.model, len(ids), "the conversation")
        self.context.close()
        self.context = self.model.context()
        return ids
