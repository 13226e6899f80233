"""The Responses API, driven by the official `openai` SDK (and the openai-agents SDK's default
model) against a real `llamay serve`.

Gemma 3 270M is small: these tests check the protocol, the stored responses' contexts (a
continuation computes only what its context lacks, and answers what a full recompute answers),
the events of a stream and what grammars enforce, never the quality of the text.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time

import httpx
import jsonschema
import openai
import pytest

from helpers import snapshot_file
from helpers.waiting import wait_until

MODEL = "gemma3:270m"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
CITY = {
    "type": "object",
    "properties": {"city": {"enum": ["Paris", "Berlin", "Rome"]}},
    "required": ["city"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url("/v1"), api_key="unused", max_retries=0)


def greedy(client, **options):
    options = {"model": MODEL, "temperature": 0, "max_output_tokens": 12} | options
    return client.responses.create(**options)


def context_of(server, response_id):
    return httpx.get(server.url(f"/llamay/v1/contexts/{response_id}"))


def test_a_response_has_openai_shape_and_is_stored_as_a_context(client, server):
    response = greedy(client, input="Say hello in three words.", instructions="Be brief.")
    assert response.id.startswith("resp_")
    assert response.object == "response"
    assert response.model == MODEL
    assert response.status in ("completed", "incomplete")
    [message] = response.output
    assert message.type == "message" and message.role == "assistant"
    assert message.id.startswith("msg_")
    [part] = message.content
    assert part.type == "output_text" and part.text == response.output_text
    assert response.instructions == "Be brief."
    assert response.store is True and response.previous_response_id is None
    usage = response.usage
    assert usage.output_tokens == 12 if response.status == "incomplete" else usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.input_tokens_details.cached_tokens == 0
    if response.status == "incomplete":
        assert response.incomplete_details.reason == "max_output_tokens"
    # It is a context of the server, holding the prompt and the answer.
    context = context_of(server, response.id)
    assert context.status_code == 200
    assert context.json()["n_tokens"] == usage.total_tokens
    fetched = client.responses.retrieve(response.id)
    assert fetched.model_dump() == response.model_dump()


def test_input_tokens_counts_what_a_response_reads(client):
    items = [
        {"role": "user", "content": [{"type": "input_text", "text": "What is 2 + 2?"}]},
    ]
    counted = client.responses.input_tokens.count(model=MODEL, input=items, instructions="Math.")
    assert counted.object == "response.input_tokens"
    response = greedy(client, input=items, instructions="Math.", store=False)
    assert counted.input_tokens == response.usage.input_tokens


def test_a_continuation_computes_only_the_new_input_and_answers_as_a_recompute(client):
    first = greedy(client, input="Name a colour.", instructions="Answer in one word.")
    second = greedy(
        client,
        previous_response_id=first.id,
        input="Name another.",
        instructions="Answer in one word.",
    )
    assert second.previous_response_id == first.id
    # The first response's whole prompt came from its context, not computed again.
    assert second.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens
    assert second.usage.input_tokens > first.usage.total_tokens
    counted = client.responses.input_tokens.count(
        model=MODEL,
        previous_response_id=first.id,
        input="Name another.",
        instructions="Answer in one word.",
    )
    assert counted.input_tokens == second.usage.input_tokens
    # The same conversation sent whole, computed from scratch, gives the same tokens.
    whole = [
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "Name another."},
    ]
    recomputed = greedy(client, input=whole, instructions="Answer in one word.", store=False)
    assert recomputed.usage.input_tokens == second.usage.input_tokens
    assert recomputed.output_text == second.output_text
    # A chain goes on: the third sees both earlier turns.
    third = greedy(client, previous_response_id=second.id, input="And one more.")
    assert third.usage.input_tokens_details.cached_tokens > 0


def test_two_continuations_of_one_response_fork_it(client, server):
    parent = greedy(client, input="Tell me about the sea.")
    held = context_of(server, parent.id).json()["n_tokens"]
    answers: dict[str, object] = {}

    def continue_with(text):
        answers[text] = greedy(client, previous_response_id=parent.id, input=text)

    threads = [threading.Thread(target=continue_with, args=(t,)) for t in ("Why?", "Where?")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(answers) == {"Why?", "Where?"}
    for text, child in answers.items():
        assert child.previous_response_id == parent.id
        assert child.usage.input_tokens_details.cached_tokens >= parent.usage.input_tokens
        alone = greedy(client, previous_response_id=parent.id, input=text, store=False)
        assert alone.output_text == child.output_text
    # The parent's context is as it was: each child wrote into its own copy.
    assert context_of(server, parent.id).json()["n_tokens"] == held


def test_a_stream_sends_the_documented_events_in_order(client):
    with client.responses.stream(
        model=MODEL,
        input="Which city is the capital of France?",
        text={"format": {"type": "json_schema", "name": "city", "schema": CITY, "strict": True}},
        temperature=0,
        max_output_tokens=40,
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in events]
    deltas = [i for i, kind in enumerate(kinds) if kind == "response.output_text.delta"]
    assert deltas, kinds
    assert kinds[: deltas[0]] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert set(kinds[deltas[0] : deltas[-1] + 1]) == {"response.output_text.delta"}
    assert kinds[deltas[-1] + 1 :] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    text = "".join(events[i].delta for i in deltas)
    assert text == events[deltas[-1] + 1].text == final.output_text
    jsonschema.validate(json.loads(text), CITY)
    assert events[0].response.status == "in_progress" and events[0].response.output == []
    assert final.status == "completed" and final.id == events[0].response.id
    assert client.responses.retrieve(final.id).output_text == text


def test_a_forced_function_call_and_its_output(client):
    called = greedy(
        client,
        input="What is the weather in Paris?",
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
        max_output_tokens=60,
    )
    [call] = called.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert call.call_id.startswith("call_") and call.id.startswith("fc_")
    jsonschema.validate(json.loads(call.arguments), WEATHER["parameters"])
    answer = greedy(
        client,
        previous_response_id=called.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 C"}],
        tools=[WEATHER],  # the same tools: the prompt begins as the first one's did
    )
    assert answer.output[0].type in ("message", "function_call")
    assert answer.usage.input_tokens_details.cached_tokens >= called.usage.input_tokens


def test_a_streamed_required_call_sends_argument_events(client):
    with client.responses.stream(
        model=MODEL,
        input="What is the weather in Rome?",
        tools=[WEATHER],
        tool_choice="required",
        temperature=0,
        max_output_tokens=60,
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in events]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    [call] = final.output
    assert events[4].arguments == call.arguments
    assert events[2].item.id == call.id and events[2].item.status == "in_progress"
    jsonschema.validate(json.loads(call.arguments), WEATHER["parameters"])


def test_delete_and_unknown_ids(client, server):
    response = greedy(client, input="Hello.")
    assert client.responses.delete(response.id) is None
    assert context_of(server, response.id).status_code == 404
    for response_id in (response.id, "resp_" + "0" * 24, "..%2F..%2Fetc"):
        with pytest.raises(openai.NotFoundError) as missing:
            client.responses.retrieve(response_id)
        error = missing.value.body
        assert error["type"] == "not_found_error" and "No response found" in error["message"]
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError) as unknown:
        greedy(client, previous_response_id=response.id, input="Go on.")
    assert unknown.value.body["param"] == "previous_response_id"


def test_a_response_made_without_store_is_not_kept(client, server):
    response = greedy(client, input="Hello.", store=False)
    assert response.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    assert context_of(server, response.id).status_code == 404


@pytest.mark.parametrize(
    ("options", "param"),
    [
        ({"input": [{"type": "input_image", "image_url": "x"}]}, "input"),
        ({"input": [{"role": "user", "content": [{"type": "input_image"}]}]}, "input"),
        ({"input": "Hi", "tools": [{"type": "web_search"}]}, "tools"),
        (
            {
                "input": "Hi",
                "tool_choice": {"type": "function", "name": "nope"},
                "tools": [WEATHER],
            },
            "tool_choice",
        ),
        ({"input": "Hi", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "Hi", "temperature": -1}, "temperature"),
        ({"input": "Hi", "text": {"format": {"type": "xml"}}}, "text.format"),
        ({"input": "Hi", "background": True}, "background"),
        ({"input": ""}, "input"),
    ],
)
def test_bad_requests_are_400_in_openai_shape(client, options, param):
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model=MODEL, **options)
    assert bad.value.body["type"] == "invalid_request_error"
    assert bad.value.body["param"] == param


def test_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.create(model="no-such-model:1b", input="Hi")
    assert missing.value.body["param"] == "model"


def test_the_routes_are_in_the_openapi_document(server):
    paths = httpx.get(server.url("/openapi.json")).json()["paths"]
    assert set(paths["/v1/responses"]) == {"post"}
    assert set(paths["/v1/responses/{response_id}"]) == {"get", "delete"}
    assert set(paths["/v1/responses/input_tokens"]) == {"post"}
    listing = paths["/v1/responses/{response_id}/input_items"]
    assert set(listing) == {"get"}
    names = {p["name"] for p in listing["get"]["parameters"] if p["in"] == "query"}
    assert names == {"limit", "order", "after", "include"}


# --- the input items of a stored response ----------------------------------------------------------

CALL_INPUT = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {
        "type": "function_call",
        "call_id": "call_paris",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    },
    {"type": "function_call_output", "call_id": "call_paris", "output": "Sunny, 21 C."},
    {"role": "user", "content": [{"type": "input_text", "text": "Say it in one word."}]},
]


def test_input_items_list_the_input_as_stored(client, server):
    response = greedy(client, input=CALL_INPUT, tools=[WEATHER], tool_choice="none")
    newest_first = client.responses.input_items.list(response.id)
    items = list(reversed(newest_first.data))  # the default order is desc
    assert [item.type for item in items] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    ids = [item.id for item in items]
    assert len(set(ids)) == 4 and all(ids)
    first, call, output, last = items
    assert first.role == "user" and [(p.type, p.text) for p in first.content] == [
        ("input_text", "What is the weather in Paris?")
    ]
    assert (call.call_id, call.name, call.arguments) == (
        "call_paris",
        "get_weather",
        '{"city": "Paris"}',
    )
    assert (output.call_id, output.output) == ("call_paris", "Sunny, 21 C.")
    assert last.content[0].text == "Say it in one word."
    # Pages of two, oldest first: the SDK follows `after` from page to page.
    page = client.responses.input_items.list(response.id, order="asc", limit=2)
    assert [item.id for item in page.data] == ids[:2] and page.has_more
    assert [item.id for item in page] == ids  # iterating fetches the next pages
    raw = httpx.get(
        server.url(f"/v1/responses/{response.id}/input_items"),
        params={"order": "asc", "limit": 3, "after": ids[0]},
    ).json()
    assert raw["object"] == "list"
    assert [item["id"] for item in raw["data"]] == ids[1:]
    assert (raw["first_id"], raw["last_id"], raw["has_more"]) == (ids[1], ids[3], False)


def test_a_continuations_input_items_are_its_own_input(client):
    first = greedy(client, input="Name a colour.")
    second = greedy(client, previous_response_id=first.id, input="Name another.")
    [item] = client.responses.input_items.list(second.id).data
    assert item.type == "message" and item.role == "user"
    assert [(p.type, p.text) for p in item.content] == [("input_text", "Name another.")]
    assert item.id.startswith("msg_")


@pytest.mark.parametrize(
    ("params", "param"),
    [({"limit": 0}, "limit"), ({"limit": 101}, "limit"), ({"limit": "x"}, "limit"),
     ({"order": "up"}, "order"), ({"after": "msg_nope"}, "after")],
)  # fmt: skip
def test_input_items_refuse_bad_pages(client, server, params, param):
    response = greedy(client, input="Hello.")
    answer = httpx.get(server.url(f"/v1/responses/{response.id}/input_items"), params=params)
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == param


def test_input_items_of_an_unknown_response_are_404(client):
    with pytest.raises(openai.NotFoundError):
        client.responses.input_items.list("resp_" + "0" * 24)


# --- stored responses outlive the server, and expire ---------------------------------------------


def test_a_stored_response_survives_a_restart(launch, tmp_path_factory):
    home = tmp_path_factory.mktemp("responses-restart-home")
    first = launch(home)
    before = openai.OpenAI(base_url=first.url("/v1"), api_key="unused", max_retries=0)
    response = greedy(before, input="Name a fruit.")
    assert (home / "responses" / f"{response.id}.llamay").is_file()
    first.process.terminate()  # as a service manager stops it
    first.process.wait(timeout=60)
    again = launch(home)
    after = openai.OpenAI(base_url=again.url("/v1"), api_key="unused", max_retries=0)
    assert after.responses.retrieve(response.id).model_dump() == response.model_dump()
    continued = greedy(after, previous_response_id=response.id, input="Another one.")
    # Its context came back from the snapshot: the conversation is not computed again.
    assert continued.usage.input_tokens_details.cached_tokens >= response.usage.input_tokens
    whole = [
        {"role": "user", "content": "Name a fruit."},
        {"role": "assistant", "content": response.output_text},
        {"role": "user", "content": "Another one."},
    ]
    assert greedy(after, input=whole, store=False).output_text == continued.output_text
    after.responses.delete(response.id)
    assert not (home / "responses" / f"{response.id}.llamay").exists()
    assert not (home / "responses" / f"{response.id}.json").exists()


def test_stored_responses_live_in_the_state_dir(launch, tmp_path_factory):
    """With --state-dir the response is a context of the directory like any other: another
    server on the directory (another LLAMAY_HOME: nothing else carries it) gets it, its input
    items and its KV."""
    state = tmp_path_factory.mktemp("responses-state")
    first = launch(tmp_path_factory.mktemp("responses-state-home"), "--state-dir", str(state))
    before = openai.OpenAI(base_url=first.url("/v1"), api_key="unused", max_retries=0)
    response = greedy(before, input=CALL_INPUT, tools=[WEATHER], tool_choice="none")
    items = before.responses.input_items.list(response.id, order="asc").model_dump()
    first.process.terminate()  # a drain writes every context to the directory
    first.process.wait(timeout=60)
    assert (state / "contexts" / response.id / "snapshot.llamay").is_file()
    assert not (first.home / "responses").exists()  # one place: the directory
    home = tmp_path_factory.mktemp("responses-state-home-2")
    again = launch(home, "--state-dir", str(state))
    after = openai.OpenAI(base_url=again.url("/v1"), api_key="unused", max_retries=0)
    assert after.responses.retrieve(response.id).model_dump() == response.model_dump()
    listed = after.responses.input_items.list(response.id, order="asc").model_dump()
    assert listed == items
    continued = greedy(
        after,
        previous_response_id=response.id,
        input="Another one.",
        tools=[WEATHER],
        tool_choice="none",
    )
    # Its context came from the directory's snapshot: the conversation is not computed again.
    assert continued.usage.input_tokens_details.cached_tokens >= response.usage.input_tokens
    whole = [
        *CALL_INPUT,
        {"role": "assistant", "content": response.output_text},
        {"role": "user", "content": "Another one."},
    ]
    recomputed = greedy(after, input=whole, tools=[WEATHER], tool_choice="none", store=False)
    assert recomputed.output_text == continued.output_text
    assert recomputed.usage.input_tokens == continued.usage.input_tokens
    after.responses.delete(response.id)
    assert not (state / "contexts" / response.id).exists()
    with pytest.raises(openai.NotFoundError):
        after.responses.retrieve(response.id)


def test_a_damaged_response_in_the_state_dir_is_a_clear_error(launch, tmp_path_factory):
    state = tmp_path_factory.mktemp("responses-damaged-state")
    home = tmp_path_factory.mktemp("responses-damaged-home")
    first = launch(home, "--state-dir", str(state))
    client = openai.OpenAI(base_url=first.url("/v1"), api_key="unused", max_retries=0)
    truncated, tampered, good = (greedy(client, input=f"Say {n}.") for n in ("one", "two", "3"))
    first.process.terminate()
    first.process.wait(timeout=60)
    path = state / "contexts" / truncated.id / "snapshot.llamay"
    path.write_bytes(path.read_bytes()[:100])
    # A whole file, every checksum right, whose record is not the response's.
    path = state / "contexts" / tampered.id / "snapshot.llamay"
    data = path.read_bytes()
    meta = json.loads(snapshot_file.sections(data)[b"META"])
    meta["note"]["response"]["response"] = {"id": "resp_" + "f" * 24, "output": []}
    path.write_bytes(snapshot_file.rebuilt(data, META=json.dumps(meta).encode()))
    again = launch(home, "--state-dir", str(state))
    client = openai.OpenAI(base_url=again.url("/v1"), api_key="unused", max_retries=0)
    for damaged in (truncated, tampered):
        with pytest.raises(openai.APIStatusError) as refused:
            client.responses.retrieve(damaged.id)
        assert refused.value.status_code == 500
        assert damaged.id in refused.value.body["message"]
    with pytest.raises(openai.APIStatusError):
        greedy(client, previous_response_id=tampered.id, input="Go on.")
    assert client.responses.retrieve(good.id).output_text == good.output_text  # still serves


def test_a_damaged_record_in_llamay_home_is_a_clear_error(launch, tmp_path_factory):
    home = tmp_path_factory.mktemp("responses-damaged-record-home")
    first = launch(home)
    client = openai.OpenAI(base_url=first.url("/v1"), api_key="unused", max_retries=0)
    truncated, other, good = (greedy(client, input=f"Say {n}.") for n in ("one", "two", "3"))
    first.process.terminate()
    first.process.wait(timeout=60)
    record = home / "responses" / f"{truncated.id}.json"
    record.write_bytes(record.read_bytes()[:40])
    # another response's record under this one's name
    (home / "responses" / f"{good.id}.json").replace(home / "responses" / f"{other.id}.json")
    again = launch(home)
    client = openai.OpenAI(base_url=again.url("/v1"), api_key="unused", max_retries=0)
    for damaged in (truncated, other):
        with pytest.raises(openai.APIStatusError) as refused:
            client.responses.retrieve(damaged.id)
        assert refused.value.status_code == 500
        assert "record is damaged" in refused.value.body["message"]
        assert damaged.id in refused.value.body["message"]
    with pytest.raises(openai.NotFoundError):  # its record moved away: it is not stored
        client.responses.retrieve(good.id)


@pytest.mark.parametrize("shared", [False, True], ids=["home", "state-dir"])
def test_stored_responses_expire_like_contexts(launch, tmp_path_factory, shared):
    home = tmp_path_factory.mktemp("responses-ttl-home")
    state = tmp_path_factory.mktemp("responses-ttl-state")
    ttl = 2
    running = launch(
        home, "--context-ttl", f"{ttl}s", *(["--state-dir", str(state)] if shared else [])
    )
    client = openai.OpenAI(base_url=running.url("/v1"), api_key="unused", max_retries=0)
    response = greedy(client, input="Hello.")

    def listed():  # listing uses no context (a GET of the one would keep it alive)
        contexts = httpx.get(running.url("/llamay/v1/contexts")).json()["contexts"]
        return response.id in {context["id"] for context in contexts}

    def unused_past_the_ttl() -> bool:  # what is left of it (retrieving it would use it)
        left = [*(home / "responses").glob(f"{response.id}.*"), state / "contexts" / response.id]
        for path in left:
            with contextlib.suppress(FileNotFoundError):
                if time.time() - path.stat().st_mtime <= ttl:
                    return False
        return True

    assert listed()
    wait_until(lambda: not listed(), 60, "the response's context did not expire")
    wait_until(unused_past_the_ttl, 60, "the response's files were touched since")
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    assert not list((home / "responses").glob(f"{response.id}.*"))
    assert not (state / "contexts" / response.id).exists()


# --- the openai-agents SDK -----------------------------------------------------------------------


@pytest.mark.parametrize("chained", [False, True])
def test_an_openai_agents_tool_loop(server, chained):
    agents = pytest.importorskip("agents")
    agents.set_tracing_disabled(True)
    calls: list[str] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        calls.append(city)
        return f"It is sunny and 21 C in {city}."

    def after_two_calls(context, results):
        # Two rounds of the loop: the second call is made with the first one's result in input.
        return agents.ToolsToFinalOutputResult(
            is_final_output=len(calls) >= 2, final_output=str(results[-1].output)
        )

    async def run():
        client = openai.AsyncOpenAI(base_url=server.url("/v1"), api_key="unused", max_retries=0)
        agent = agents.Agent(
            name="weather",
            instructions="You answer questions about the weather.",
            model=agents.OpenAIResponsesModel(model=MODEL, openai_client=client),
            tools=[get_weather],
            # Forcing the function makes the loop deterministic on a 270M model.
            model_settings=agents.ModelSettings(
                tool_choice="get_weather", temperature=0, max_tokens=60
            ),
            tool_use_behavior=after_two_calls,
            reset_tool_choice=False,
        )
        result = await agents.Runner.run(
            agent, "What is the weather in Paris?", max_turns=4, auto_previous_response_id=chained
        )
        await client.close()
        return result

    result = asyncio.run(run())
    assert len(calls) == 2 and all(isinstance(city, str) and city for city in calls)
    assert result.final_output == f"It is sunny and 21 C in {calls[-1]}."
    kinds = [type(item).__name__ for item in result.new_items]
    assert kinds == ["ToolCallItem", "ToolCallOutputItem"] * 2
    first, second = result.raw_responses
    assert second.usage.input_tokens > first.usage.input_tokens
    if chained:  # previous_response_id: the first turn's prompt came from its context
        assert second.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens


def test_a_streamed_continuation_answers_as_one_sent_whole(client):
    first = greedy(client, input="Name a month.")
    with client.responses.stream(
        model=MODEL,
        previous_response_id=first.id,
        input="And the next one?",
        temperature=0,
        max_output_tokens=12,
    ) as stream:
        events = list(stream)
    final = events[-1].response
    assert events[-1].type in ("response.completed", "response.incomplete")
    assert final.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == final.output_text
    assert client.responses.retrieve(final.id).output_text == text
    whole = greedy(
        client,
        input=[
            {"role": "user", "content": "Name a month."},
            {"role": "assistant", "content": first.output_text},
            {"role": "user", "content": "And the next one?"},
        ],
        store=False,
    )
    assert whole.output_text == text
