"""`llamay run MODEL [PROMPT]`: generate text, streamed as it is made, or chat; locally, or through
the remote provider that $LLAMAY_HOME/config.toml names for MODEL."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

import llamay
from llamay import chat, providers, store
from llamay.engine import Model
from llamay.engine.generate import chat_prompt_ids
from llamay.errors import GrammarError, LlamayError, ModelNotFound
from llamay.server.ollama_options import OLLAMA_OPTIONS

from .engine_options import draft_option, kv_type_option, lookup_option
from .inputs import read_text_file
from .run_chat import LocalChat, RemoteChat
from .run_fim import FIM_FLAGS, check_fim, fim_ids, fim_options, wants_fim
from .run_settings import PARAMETERS, REMOTE_PARAMETERS, Settings, remote_kwargs, seeded
from .run_stream import (
    Printed,
    check_fits,
    ctrl_c_cancels,
    echo_stats,
    local_stats,
    stream_local,
    stream_remote,
)

# The generation parameters' flags, by click's names (generate's keywords) -> by Settings'
# (Ollama's) names.
_FLAGS = {keyword: name for name, keyword in OLLAMA_OPTIONS.items()}
_LOCAL_ONLY = (
    "threads",
    "lookup",
    "draft",
    "kv_type",
    "n_ctx",
    "raw",
    "grammar_file",
    "json_schema",
    "logprobs",
    "hide_thinking",
)


def _default(name: str) -> Any:
    return PARAMETERS[name].default


@click.command()
@click.argument("model")
@click.argument("prompt", required=False)
@click.option(
    "-n",
    "--n-predict",
    "max_tokens",
    type=click.IntRange(min=0),
    help="Generate at most N tokens. "
    "[default: until the model ends its turn or the context is full]",
)
@click.option(
    "--temp",
    "temperature",
    type=click.FloatRange(min=0),
    default=_default("temperature"),
    show_default=True,
    help="Sampling temperature; 0 is greedy (the same text on every run).",
)
@click.option(
    "--top-k",
    type=click.IntRange(min=0),
    default=_default("top_k"),
    show_default=True,
    help="Keep the K most likely tokens (0: all).",
)
@click.option(
    "--top-p",
    type=click.FloatRange(0, 1, min_open=True),
    default=_default("top_p"),
    show_default=True,
    help="Keep the most likely tokens that together reach probability P (1: all).",
)
@click.option(
    "--min-p",
    type=click.FloatRange(0, 1),
    default=_default("min_p"),
    show_default=True,
    help="Keep tokens at least P times as likely as the most likely one (0: all).",
)
@click.option(
    "--typical-p",
    type=click.FloatRange(0, 1, min_open=True),
    default=_default("typical_p"),
    show_default=True,
    help="Locally typical sampling: keep the tokens closest to the expected surprise that "
    "together reach probability P (1: off).",
)
@click.option(
    "--repeat-penalty",
    type=click.FloatRange(min=0, min_open=True),
    default=_default("repeat_penalty"),
    show_default=True,
    help="Divide the logits of tokens seen in the last --repeat-last-n tokens by R (1: off).",
)
@click.option(
    "--repeat-last-n",
    type=click.IntRange(min=-1),
    default=_default("repeat_last_n"),
    show_default=True,
    help="How many recent tokens the penalties look at (-1: the whole context, 0: none).",
)
@click.option(
    "--presence-penalty",
    type=float,
    default=_default("presence_penalty"),
    show_default=True,
    help="Subtract P from the logit of every token seen in the last --repeat-last-n (0: off).",
)
@click.option(
    "--frequency-penalty",
    type=float,
    default=_default("frequency_penalty"),
    show_default=True,
    help="Subtract F times its count from the logit of each token seen there (0: off).",
)
@click.option(
    "--seed", type=int, help="Seed of the sampler. [default: a fresh one, shown in the stats]"
)
@click.option(
    "--stop",
    multiple=True,
    metavar="TEXT",
    help="End the answer where TEXT appears (not printed). Repeat for several.",
)
@click.option(
    "--grammar-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Constrain the output to a GBNF grammar (llama.cpp's format) read from this file.",
)
@click.option(
    "--json-schema",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Constrain the output to JSON matching the JSON schema in this file.",
)
@click.option(
    "--logprobs",
    is_flag=True,
    help='Also write one JSON line per generated token to stderr: {"token": ID, "text": ..., '
    '"logprob": ...}: the log-softmax of the raw logits, before penalties and sampling.',
)
@click.option("--threads", type=click.IntRange(min=1), help="CPU threads. [default: all cores]")
@lookup_option
@draft_option
@kv_type_option()
@click.option(
    "-c",
    "--ctx-size",
    "n_ctx",
    type=click.IntRange(min=1),
    help="Context size in tokens. [default: the model's num_ctx, else 4096 or the training "
    "context if smaller]",
)
@click.option("--raw", is_flag=True, help="No chat template: BOS + PROMPT, special tokens parsed.")
@click.option(
    "--hide-thinking",
    is_flag=True,
    help="Leave out the reasoning of a model that thinks (Qwen 3 <think>, gpt-oss analysis); "
    "otherwise it is shown dimmed before the answer.",
)
@click.option("--system", help="A system message for the chat template.")
@fim_options
@click.pass_context
def run(
    click_context: click.Context,
    model: str,
    prompt: str | None,
    threads: int | None,
    lookup: int,
    draft: str | None,
    kv_type: str | None,
    n_ctx: int | None,
    raw: bool,
    hide_thinking: bool,
    system: str | None,
    grammar_file: Path | None,
    json_schema: Path | None,
    logprobs: bool,
    **parameters: Any,
) -> None:
    """Generate a continuation of PROMPT, or chat with MODEL when no PROMPT is given.

    With PROMPT only the generated text goes to stdout, as it is made; the token counts and speeds
    go to stderr. The prompt goes through the model's chat template (with --system as the system
    message) unless --raw is given. Sampling follows llama.cpp's chain and defaults: penalties,
    top-k, typical-p, top-p, min-p, then temperature. A model pulled from an Ollama registry
    brings its own defaults (its params layer, its system prompt); flags override them.

    With --fim-prefix and --fim-suffix (or their -file forms) and no PROMPT: the code a
    fill-in-the-middle model (Qwen2.5-Coder...) puts between them, and only that.

    Without PROMPT: a conversation. Each line you type is a turn; a turn of several lines goes
    between \"\"\" and \"\"\". Ctrl-C stops an answer, /bye or Ctrl-D ends the session. /set lists
    and changes the settings, /show shows the model and the settings, /clear forgets the
    conversation, /fork continues in a copy-on-write fork of it (/back returns), /save FILE and
    /load FILE write and read a snapshot of it with its KV state. /help lists the commands.

    A MODEL that $LLAMAY_HOME/config.toml lists under a provider runs there: the conversation is
    sent to that OpenAI-compatible or Anthropic endpoint, and only its text is printed.
    """
    fim = {name: parameters.pop(name) for name in FIM_FLAGS}
    if wants_fim(fim):
        check_fim(fim, prompt, raw, system)
    given = {
        name
        for name in (*_LOCAL_ONLY, "system", *_FLAGS)
        if click_context.get_parameter_source(name) != click.core.ParameterSource.DEFAULT
    }
    flags = {_FLAGS[key]: value for key, value in parameters.items() if key in given}
    if "stop" in flags:
        flags["stop"] = tuple(flags["stop"])
    if raw and system is not None:
        raise click.UsageError("--system needs the chat template; drop --raw")
    if raw and prompt is None:
        raise click.UsageError("--raw needs a PROMPT (a chat goes through the chat template)")
    if grammar_file is not None and json_schema is not None:
        raise click.UsageError(
            "--grammar-file and --json-schema both constrain the output: pick one"
        )

    provider = providers.find(model)
    if provider is not None and wants_fim(fim):
        raise click.UsageError("a FIM run needs a local model: its FIM tokens make the prompt")
    if provider is not None:
        _run_remote(provider, prompt, Settings(flags, system), given)
        return

    layer, model_system = _pulled_defaults(model)
    settings = Settings.layered(layer, flags, system if system is not None else model_system)
    grammar = _grammar(grammar_file, json_schema)
    if n_ctx is None and isinstance(layer.get("num_ctx"), int) and layer["num_ctx"] > 0:
        n_ctx = layer["num_ctx"]
    loaded = llamay.load(
        model, threads=threads, n_ctx=n_ctx, kv_type=kv_type, lookup=lookup, draft=draft
    )
    try:
        if wants_fim(fim):
            max_tokens = settings.generate_kwargs().get("max_tokens")
            ids = fim_ids(loaded, model, fim, max_tokens)
            _complete(loaded, ids, settings, grammar, logprobs, thinking="raw")
            return
        if prompt is None:
            conversation = LocalChat(loaded, model, settings, grammar, logprobs)
            conversation.thinking = "hide" if hide_thinking else "show"
            conversation.loop()
            return
        if raw:
            ids = loaded.tokenize(prompt, add_bos=True, special=True)
        else:
            rendered = chat.render_chat(loaded, _messages(settings.system, prompt))
            ids = chat_prompt_ids(loaded, rendered)
        thinking = "raw" if raw else "hide" if hide_thinking else "show"
        _complete(loaded, ids, settings, grammar, logprobs, thinking)
    finally:
        loaded.close()


# --- one prompt ----------------------------------------------------------------------------------


def _complete(
    model: Model,
    ids: list[int],
    settings: Settings,
    grammar: Any,
    logprobs: bool,
    thinking: str = "show",
) -> None:
    check_fits(model, len(ids), "the prompt")
    kwargs, seed = seeded(settings)
    generation = model.generate(ids, **kwargs, grammar=grammar, logprobs=0 if logprobs else None)
    printed = Printed()
    try:
        with ctrl_c_cancels(generation):
            stream_local(
                model, generation, logprobs, thinking=thinking, prompt_ids=ids, printed=printed
            )
    finally:
        generation.context.close()
    echo_stats(local_stats(generation, seed), printed)
    if generation.finish_reason == "cancelled":
        sys.exit(130)


def _messages(system: str | None, *user: str) -> list[dict[str, str]]:
    head = [{"role": "system", "content": system}] if system is not None else []
    return head + [{"role": "user", "content": text} for text in user]


def _grammar(grammar_file: Path | None, json_schema: Path | None) -> Any:
    """The grammar that --grammar-file or --json-schema asks for, or None."""
    if grammar_file is None and json_schema is None:
        return None
    from llamay.grammar import Grammar  # only constrained runs need the grammar compiler

    path = grammar_file if grammar_file is not None else json_schema
    try:
        if grammar_file is not None:
            return Grammar.from_gbnf(read_text_file(grammar_file))
        return Grammar.from_json_schema(json.loads(read_text_file(json_schema)))
    except json.JSONDecodeError as exc:
        raise LlamayError(f"{path}: not JSON: {exc}") from None
    except GrammarError as exc:
        raise GrammarError(f"{path}: {exc}") from None


def _pulled_defaults(model: str) -> tuple[dict[str, Any], str | None]:
    """A pulled model's params layer and system prompt; nothing for a file or a built-in name."""
    if Path(model).expanduser().exists():
        return {}, None
    try:
        entry = store.model_info(model)
    except ModelNotFound:
        return {}, None
    return dict(entry.params or {}), entry.system


# --- a remote model ------------------------------------------------------------------------------


def _run_remote(
    provider: providers.Provider, prompt: str | None, settings: Settings, given: set[str]
) -> None:
    passed = REMOTE_PARAMETERS[provider.api]
    flags = {option.name: option.opts[-1] for option in click.get_current_context().command.params}
    for name in sorted(given):
        if name in _LOCAL_ONLY or (name in _FLAGS and _FLAGS[name] not in passed):
            flag = flags[name]
            raise click.UsageError(
                f"{flag} applies to local models only; {provider.name} is served by provider "
                f"{provider.config.name!r} ({provider.api} API), which is sent "
                f"{', '.join(passed)} and --system"
            )
    if prompt is None:
        RemoteChat(provider, settings).loop()
        return
    reply = provider.chat(
        _messages(settings.system, prompt), stream=True, **remote_kwargs(provider.api, settings)
    )
    printed = Printed()
    try:
        stream_remote(reply, printed)
    except KeyboardInterrupt:
        reply.close()
        echo_stats(
            f"{provider.name} via provider {provider.config.name!r}: finish: cancelled", printed
        )
        sys.exit(130)
    counts = f"generated {reply.n_generated} tokens, " if reply.n_generated is not None else ""
    echo_stats(
        f"{provider.name} via provider {provider.config.name!r}: {counts}"
        f"finish: {reply.finish_reason}",
        printed,
    )
