"""The chat of `llamay run MODEL` without a prompt: turns, slash commands, Ctrl-C.

`Chat` reads entries and runs the commands every chat has (/set, /show, /clear, /help); a turn
and the rest of what it does belong to `LocalChat` (a model here, its conversation in one
context, with /fork, /back, /save and /load over the state engine) or to `RemoteChat` (a model
a provider serves; the conversation is resent each turn, as those APIs want).
"""

from __future__ import annotations

import signal
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import click

from llamay import chat, providers
from llamay.engine import Context, Model
from llamay.engine.generate import chat_prompt_ids
from llamay.errors import LlamayError

from .run_input import Input
from .run_settings import PARAMETERS, REMOTE_PARAMETERS, Settings, remote_kwargs, seeded
from .run_stream import check_fits, stream_local, stream_remote

_COMMON_HELP = (
    "  /set                 list the settings; /set NAME VALUE changes one, /set NAME restores it",
    "  /set system TEXT     the system prompt (/set system alone removes it)",
    "  /show [WHAT]         the model, the settings, the system prompt and the chat template",
    "                       (WHAT: info, parameters, system or template)",
    "  /clear               forget the conversation (/reset does the same)",
    '  """                  begin or end a message of several lines',
    "  /bye                 leave (Ctrl-D too); Ctrl-C stops an answer",
)


def _say(text: str) -> None:
    """A command's report: on stderr, so that stdout holds only the answers."""
    click.echo(text, err=True)


class Chat(ABC):
    """The loop over what the user types. Subclasses answer turns (`turn`), forget the
    conversation (`clear`), describe the model (`info`, `template`) and may add commands
    (`command`)."""

    help_lines: ClassVar[tuple[str, ...]] = ()

    def __init__(self, settings: Settings):
        self.settings = settings
        self.turns: list[dict[str, str]] = []  # the conversation, without the system prompt
        self.generation: Any = None  # a local answer being made: Ctrl-C cancels it
        self.reading = False

    def loop(self) -> None:
        entries = Input()
        previous = signal.signal(signal.SIGINT, self._on_ctrl_c)
        try:
            while (entry := self._read(entries)) is not None:
                if entry.command:
                    self._command(entry.text)
                elif entry.text.strip():
                    try:
                        self.turn(entry.text)
                    except KeyboardInterrupt:
                        click.echo()  # end the answer's line, as a finished answer does
                        _say("(stopped: the answer is not kept)")
        finally:
            signal.signal(signal.SIGINT, previous)
            self.close()

    def _read(self, entries: Input):
        while True:
            self.reading = True
            try:
                return entries.read()
            except KeyboardInterrupt:
                _say("\n(/bye or Ctrl-D to leave)")
            finally:
                self.reading = False

    def _on_ctrl_c(self, signum: int, frame: object) -> None:
        # A local answer stops between two tokens, so its context is never left half-fed;
        # anything else (typing, a remote answer) is interrupted where it is.
        if self.generation is not None and not self.reading:
            self.generation.cancel()
        else:
            raise KeyboardInterrupt

    def messages(self, turns: list[dict[str, str]] | None = None) -> list[dict[str, str]]:
        """The conversation (or `turns`) after the system prompt, as the chat template and the
        remote APIs take it."""
        system = self.settings.system
        head = [{"role": "system", "content": system}] if system is not None else []
        return head + (self.turns if turns is None else turns)

    def _command(self, line: str) -> None:
        name, _, argument = line.partition(" ")
        argument = argument.strip()
        if name == "/set":
            self._set(argument)
        elif name == "/show":
            self._show(argument)
        elif name in ("/clear", "/reset"):
            self.clear()
            _say("(the conversation is cleared)")
        elif not self.command(name, argument):
            _say("commands:\n" + "\n".join((*_COMMON_HELP, *self.help_lines)))

    def _set(self, argument: str) -> None:
        if not argument:
            _say("\n".join(["parameters:", *self.settings.lines(), f"  system  {self._system()}"]))
            return
        name, _, value = argument.partition(" ")
        if name != "system" and name in PARAMETERS and not self.settable(name):
            return
        try:
            self.settings.set(name, value.strip())
        except ValueError as exc:
            _say(f"error: {exc}")
            return
        shown = self._system() if name == "system" else self.settings.shown(name)
        _say(f"({name} is {shown})")

    def _show(self, what: str) -> None:
        sections = {
            "info": self.info,
            "parameters": self.settings.lines,
            "system": lambda: ["  " + line for line in self._system().splitlines()],
            "template": lambda: ["  " + line for line in self.template().splitlines()],
        }
        if what and what not in sections:
            _say(f"/show takes one of: {', '.join(sections)}")
            return
        for name in [what] if what else sections:
            _say("\n".join([f"{name}:", *sections[name]()]))

    def _system(self) -> str:
        return "(none)" if self.settings.system is None else self.settings.system

    # --- what subclasses do ---

    @abstractmethod
    def turn(self, text: str) -> None:
        """Answer one user message, streaming the answer to stdout."""

    def clear(self) -> None:
        self.turns = []

    @abstractmethod
    def info(self) -> list[str]:
        """Lines about the model, for /show."""

    @abstractmethod
    def template(self) -> str:
        """The chat template, for /show."""

    def settable(self, name: str) -> bool:
        return True

    def command(self, name: str, argument: str) -> bool:
        """Run a command of this kind of chat; False if it has none of that name."""
        return False

    @abstractmethod
    def close(self) -> None:
        """Free what the conversation holds."""


class LocalChat(Chat):
    """A conversation with a model here, over one context.

    Each turn renders the whole conversation through the chat template and feeds only the text
    beyond what the context already holds (`held`). A template may rewrite earlier turns (trim an
    answer, drop its reasoning), a stop string cuts an answer short of its tokens, /set system
    changes the first message: then the context no longer matches the rendering and is rebuilt
    from it.
    """

    help_lines = (
        "  /fork                continue in a copy-on-write fork of the conversation",
        "  /back                return to the conversation before the last /fork",
        "  /save FILE           write the conversation and its KV state to FILE",
        "  /load FILE           continue the conversation saved in FILE",
    )

    def __init__(self, model: Model, name: str, settings: Settings, grammar: Any, logprobs: bool):
        super().__init__(settings)
        self.model = model
        self.name = name
        self.thinking = "show"  # or "hide" (--hide-thinking): see stream_local
        self.grammar = grammar
        self.logprobs = logprobs
        self.context = model.context()
        # The text the context's tokens stand for; None while a turn changes the context, and
        # after a turn that did not finish, so that the next one rebuilds it.
        self.held: str | None = ""
        # Conversations set aside by /fork, newest last: (context, turns, held).
        self.branches: list[tuple[Context, list[dict[str, str]], str | None]] = []

    def turn(self, text: str) -> None:
        """Answer one user message, streaming the answer to stdout; the context meter follows
        on stderr. A cancelled answer is kept as far as it went."""
        turns = [*self.turns, {"role": "user", "content": text}]
        rendered = chat.render_chat(self.model, self.messages(turns))
        ids = self._ids_to_feed(rendered)
        kwargs, _ = seeded(self.settings)
        logprobs = 0 if self.logprobs else None
        self.held = None
        self.generation = self.model.generate(
            ids, context=self.context, grammar=self.grammar, logprobs=logprobs, **kwargs
        )
        try:
            answer = stream_local(
                self.model, self.generation, self.logprobs, thinking=self.thinking, prompt_ids=ids
            )
        finally:
            tokens = list(self.generation.tokens)
            self.generation = None
        click.echo()
        # What the context holds is the text of its tokens, which a stop string may exceed.
        decoder = self.model.tokenizer.stream()
        self.held = rendered + "".join(map(decoder.feed, tokens)) + decoder.flush()
        self.turns = [*turns, {"role": "assistant", "content": answer}]
        _say(f"[{self.context.n_tokens}/{self.model.n_ctx} tokens]")

    def _ids_to_feed(self, rendered: str) -> list[int]:
        """The tokens that take the context from what it holds to `rendered` (after making it a
        fresh context if what it holds is not a prefix of `rendered`)."""
        if self.context.tokens and self.held is not None and rendered.startswith(self.held):
            ids = self.model.tokenize(rendered[len(self.held) :], add_bos=False, special=True)
            check_fits(self.model, len(self.context.tokens) + len(ids), "the conversation")
            return ids
        ids = chat_prompt_ids(self.model, rendered)
        check_fits(self.model, len(ids), "the conversation")
        self._replace(self.model.context(), self.turns, "")
        return ids

    def clear(self) -> None:
        self._replace(self.model.context(), [], "")

    def info(self) -> list[str]:
        model = self.model
        return [
            f"  model         {self.name}",
            f"  file          {model.path}",
            f"  architecture  {model.arch}",
            f"  context       {model.n_ctx} tokens (trained on {model.hparams.n_ctx_train}), "
            f"{self.context.n_tokens} in use",
            f"  vocabulary    {model.n_vocab} tokens",
        ]

    def template(self) -> str:
        return self.model.chat_template.source

    def command(self, name: str, argument: str) -> bool:
        if name == "/fork":
            # The fork shares every page with the conversation it leaves (copy-on-write).
            self.branches.append((self.context, list(self.turns), self.held))
            self.context = self.context.fork()
            _say(f"(forked: /back returns to the conversation before, {len(self.branches)} kept)")
        elif name == "/back":
            if not self.branches:
                _say("(no fork to go back to)")
                return True
            self.context.close()
            self.context, self.turns, self.held = self.branches.pop()
            _say("(back to the conversation before the last /fork)")
        elif name == "/save" and argument:
            try:
                self.context.save(argument, note={"messages": self.messages(), "held": self.held})
            except (LlamayError, OSError) as exc:
                _say(f"error: {exc}")
                return True
            _say(f"(saved {self.context.n_tokens} tokens to {argument})")
        elif name == "/load" and argument:
            self._load(argument)
        else:
            return False
        return True

    def _load(self, path: str) -> None:
        try:
            context = self.model.restore(path)
        except (LlamayError, OSError) as exc:
            _say(f"error: {exc}")
            return
        note = context.note or {}
        messages = list(note.get("messages", []))
        if messages and messages[0].get("role") == "system":
            self.settings.system = messages.pop(0)["content"]
        held = note.get("held")
        self._replace(context, messages, held if isinstance(held, str) else None)
        _say(f"(loaded {context.n_tokens} tokens from {path})")

    def _replace(self, context: Context, turns: list[dict[str, str]], held: str | None) -> None:
        self.context.close()
        self.context, self.turns, self.held = context, turns, held

    def close(self) -> None:
        for context, _, _ in self.branches:
            context.close()
        self.context.close()


class RemoteChat(Chat):
    """A conversation with a model a provider serves: each turn sends the whole conversation."""

    def __init__(self, provider: providers.Provider, settings: Settings):
        super().__init__(settings)
        self.provider = provider

    def turn(self, text: str) -> None:
        turns = [*self.turns, {"role": "user", "content": text}]
        try:
            reply = self.provider.chat(
                self.messages(turns), stream=True, **remote_kwargs(self.provider.api, self.settings)
            )
            answer = stream_remote(reply)
        except providers.ProviderError as exc:
            _say(f"error: {exc}")
            return
        click.echo()
        self.turns = [*turns, {"role": "assistant", "content": answer}]

    def settable(self, name: str) -> bool:
        passed = REMOTE_PARAMETERS[self.provider.api]
        if name not in passed:
            _say(
                f"({name} is not sent to {self.provider.api} providers; "
                f"they take {', '.join(passed)})"
            )
        return name in passed

    def info(self) -> list[str]:
        provider = self.provider
        return [
            f"  model           {provider.name}",
            f"  provider        {provider.config.name} ({provider.api} API)",
            f"  endpoint        {provider.url}",
            f"  upstream model  {provider.upstream_model}",
        ]

    def template(self) -> str:
        return "(the provider applies its own)"

    def close(self) -> None:
        """A remote conversation holds nothing here but its messages."""
