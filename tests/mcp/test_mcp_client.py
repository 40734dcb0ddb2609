"""`warpfold mcp` driven by the official Python MCP SDK, as an assistant would drive it.

Run by scripts/test.sh as `.venv-mcp/bin/python tests/mcp/test_mcp_client.py -v` after
`bash scripts/install-mcp-client.sh` and the release build (the real `warpfold` binary and the
default models, `warpfold models fetch`).

The bundled sample documents are indexed by the real binary; the SDK's stdio client starts
`warpfold mcp --db` on that index and connects as clients do (the newer clients' `server/discover`
probe, answered "method not found", then the initialize handshake). It checks that a question
whose answer is known finds its document and page first, that the page holds the known sentence,
that resources list and read every document, that a path the index does not hold is refused as a
tool error, that a document indexed while the server runs is found, and `ask`: answered with a
citation of the right page when the default chat model is installed (skipped, saying so, when it
is not), and, always, refused clearly by a server whose models folder holds no chat model.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

REPO = Path(__file__).resolve().parent.parent.parent
BINARY = Path(os.environ.get("WARPFOLD_BIN", REPO / "target/release/warpfold"))
MODELS = REPO / "models"
# What the bundled samples hold (crates/index/src/samples.rs): the question `make-samples` suggests,
# the document and page that answer it, and a sentence of that page.
QUESTION = "when should I pick tomatoes so they ripen indoors"
ANSWER_DOCUMENT = "gardening/tomatoes.pdf"
ANSWER_PAGE = 2
ANSWER_SENTENCE = "A green tomato picked at the breaker stage"
# A document indexed while the server runs, with a fact nothing else holds, and a question that
# shares none of its words: only the vectors find it, and only once the server has loaded them
# again (the keyword half reads the live index anyway).
ADDED_NAME = "lighthouse.md"
ADDED_TEXT = "# The lighthouse\n\nThe lighthouse keeper's cat is named Marmaduke and sleeps on the lens housing.\n"
ADDED_QUESTION = "feline pet of the beacon tender"
# What `ask` is asked: a fact the CPU's default chat model answers from the samples, and where.
ASK_QUESTION = "When did Galileo find the four largest moons of Jupiter?"
ASK_DOCUMENT, ASK_PAGE, ASK_FACT = "astronomy/moons.pdf", 1, "1610"
TOOLS = {"search", "get_document", "get_page", "ask", "list_folders"}


def warpfold(*args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run([str(BINARY), *args], capture_output=True, text=True, env=env or base_env(), timeout=900)
    if proc.returncode != 0:
        raise AssertionError(f"warpfold {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def base_env() -> dict[str, str]:
    return {**os.environ, "WARPFOLD_MODELS_DIR": str(MODELS), "WARPFOLD_LOG": "warn"}


def server(db: Path, data_dir: Path, *, models_dir: Path = MODELS, extra: tuple[str, ...] = ()) -> Client:
    """An SDK client that starts `warpfold mcp` on `db` as a desktop assistant would."""
    params = StdioServerParameters(
        command=str(BINARY),
        args=[*extra, "mcp", "--db", str(db), "--data-dir", str(data_dir)],
        env={"WARPFOLD_MODELS_DIR": str(models_dir), "WARPFOLD_LOG": "warn"},
    )
    return Client(params, read_timeout_seconds=600)


def text_of(result) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


class McpClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        if not BINARY.exists():
            raise unittest.SkipTest(f"{BINARY} is not built: cargo build --release")
        cls.tmp = tempfile.TemporaryDirectory(prefix="warpfold-mcp-")
        root = Path(cls.tmp.name)
        cls.samples = root / "samples"
        cls.db = root / "index.db"
        cls.data_dir = root / "data"
        cls.data_dir.mkdir()
        warpfold("make-samples", str(cls.samples))
        warpfold("index", str(cls.samples), "--db", str(cls.db))
        # the settings the desktop app would have written for a watched folder
        (cls.data_dir / "settings.json").write_text(json.dumps({"folders": [str(cls.samples.resolve())]}))
        cls.answer_path = str((cls.samples / ANSWER_DOCUMENT).resolve())

    @classmethod
    def tearDownClass(cls) -> None:
        cls.tmp.cleanup()

    def test_an_assistant_searches_reads_and_is_refused_what_the_index_does_not_hold(self) -> None:
        asyncio.run(self.search_read_and_refuse())

    async def search_read_and_refuse(self) -> None:
        async with server(self.db, self.data_dir) as client:
            self.assertEqual(client.server_info.name, "warpfold")
            tools = {t.name: t for t in (await client.list_tools()).tools}
            self.assertEqual(set(tools), TOOLS)
            self.assertIn("query", tools["search"].input_schema["required"])
            self.assertTrue(all(t.annotations.read_only_hint for t in tools.values()))

            found = await client.call_tool("search", {"query": QUESTION, "k": 3})
            self.assertFalse(found.is_error, text_of(found))
            hits = found.structured_content["hits"]
            self.assertEqual((hits[0]["path"], hits[0]["page"]), (self.answer_path, ANSWER_PAGE), hits)
            self.assertLessEqual(len(hits), 3)
            self.assertIn(self.answer_path, text_of(found))

            # filters: only PDFs under the gardening folder; a type no document has finds nothing
            only = await client.call_tool("search", {"query": QUESTION, "folder": str(self.samples.resolve() / "gardening"), "type": "pdf"})
            paths = {h["path"] for h in only.structured_content["hits"]}
            self.assertEqual(paths, {self.answer_path})
            none = await client.call_tool("search", {"query": QUESTION, "type": "xlsx"})
            self.assertFalse(none.is_error)
            self.assertEqual(none.structured_content["hits"], [])

            page = await client.call_tool("get_page", {"path": self.answer_path, "page": ANSWER_PAGE})
            self.assertFalse(page.is_error, text_of(page))
            self.assertIn(ANSWER_SENTENCE, text_of(page))
            whole = await client.call_tool("get_document", {"path": self.answer_path})
            self.assertIn(f"--- page {ANSWER_PAGE} of", text_of(whole))
            self.assertIn(ANSWER_SENTENCE, text_of(whole))

            # a real file the index does not hold, and one nowhere: tool errors that say why
            for path in [str(BINARY.resolve()), "/no/such/file.pdf"]:
                refused = await client.call_tool("get_document", {"path": path})
                self.assertTrue(refused.is_error, text_of(refused))
                self.assertIn("is not a document in the index", text_of(refused))
            bad = await client.call_tool("search", {"query": QUESTION, "k": 500})
            self.assertTrue(bad.is_error)
            self.assertIn("`k` must be from 1 to 50", text_of(bad))
            past = await client.call_tool("get_page", {"path": self.answer_path, "page": 99})
            self.assertTrue(past.is_error)
            self.assertIn("has no page 99", text_of(past))

            listed = await client.list_resources()
            self.assertIsNone(listed.next_cursor)
            by_name = {r.name: r for r in listed.resources}
            self.assertIn("tomatoes.pdf", by_name)
            resource = by_name["tomatoes.pdf"]
            self.assertTrue(resource.uri.startswith("warpfold://document/"), resource.uri)
            self.assertEqual(resource.mime_type, "text/plain")
            read = await client.read_resource(resource.uri)
            self.assertIn(ANSWER_SENTENCE, read.contents[0].text)

            folders = await client.call_tool("list_folders", {})
            self.assertEqual(folders.structured_content["folders"][0]["path"], str(self.samples.resolve()))
            self.assertEqual(folders.structured_content["folders"][0]["documents"], len(listed.resources))

            # the app indexes a new document while the assistant is connected: the next search finds it
            added = self.samples / "notes" / ADDED_NAME
            added.write_text(ADDED_TEXT)
            try:
                warpfold("index", str(self.samples), "--db", str(self.db))
                fresh = await client.call_tool("search", {"query": ADDED_QUESTION, "k": 1})
                self.assertEqual(fresh.structured_content["hits"][0]["path"], str(added.resolve()), text_of(fresh))
            finally:
                added.unlink()
                warpfold("index", str(self.samples), "--db", str(self.db), "--prune")

    def test_ask_answers_with_a_citation_or_says_the_chat_model_is_missing(self) -> None:
        asyncio.run(self.ask())

    async def ask(self) -> None:
        async with server(self.db, self.data_dir) as client:
            asked = await client.call_tool("ask", {"question": ASK_QUESTION, "passages": 2})
        if asked.is_error and "is not installed" in text_of(asked):
            self.skipTest(f"no chat model installed: {text_of(asked)}")
        self.assertFalse(asked.is_error, text_of(asked))
        answer = asked.structured_content
        self.assertTrue(answer["answerable"], answer)
        cited = str((self.samples / ASK_DOCUMENT).resolve())
        self.assertIn((cited, ASK_PAGE), [(c["path"], c["page"]) for c in answer["citations"]], answer)
        self.assertIn(ASK_FACT, answer["answer"], answer)
        self.assertIn(f"{cited}  page {ASK_PAGE}", text_of(asked))

    def test_ask_without_a_chat_model_is_a_clear_tool_error(self) -> None:
        asyncio.run(self.ask_without_chat_model())

    async def ask_without_chat_model(self) -> None:
        with tempfile.TemporaryDirectory() as empty:
            # the embedding model named by path, the chat model looked for in an empty models folder
            embedder = ("--model", str(MODELS / "all-MiniLM-L6-v2"))
            async with server(self.db, self.data_dir, models_dir=Path(empty), extra=embedder) as client:
                asked = await client.call_tool("ask", {"question": QUESTION})
                self.assertTrue(asked.is_error, text_of(asked))
                self.assertIn("is not installed", text_of(asked))
                self.assertIn("warpfold models fetch", text_of(asked))
                # the server is still there, and search works
                found = await client.call_tool("search", {"query": QUESTION, "k": 1})
                self.assertEqual(found.structured_content["hits"][0]["path"], self.answer_path)

    def test_stdout_carries_only_protocol_messages(self) -> None:
        """Raw lines, no SDK: a malformed line, a ping, an unknown method and a missing index are answered
        in JSON-RPC, one JSON object a line, and nothing else reaches stdout."""
        lines = [
            "this is not json",
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}),
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json.dumps({"jsonrpc": "2.0", "id": "p", "method": "ping"}),
            json.dumps({"jsonrpc": "2.0", "id": 2, "method": "no/such/method"}),
            json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "search", "arguments": {"query": "anything"}}}),
        ]
        with tempfile.TemporaryDirectory() as tmp:
            missing = Path(tmp) / "missing.db"
            proc = subprocess.run(
                [str(BINARY), "mcp", "--db", str(missing), "--data-dir", tmp],
                input="\n".join(lines) + "\n",
                capture_output=True,
                text=True,
                env={**base_env(), "WARPFOLD_LOG": "debug"},
                timeout=120,
            )
            self.assertFalse(missing.exists(), "a read-only server creates no index")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        replies = [json.loads(line) for line in proc.stdout.splitlines()]
        self.assertEqual(len(replies), 5, proc.stdout)
        self.assertEqual(replies[0]["error"]["code"], -32700)
        self.assertEqual(replies[1]["result"]["protocolVersion"], "2025-06-18")
        self.assertEqual((replies[2]["id"], replies[2]["result"]), ("p", {}))
        self.assertEqual((replies[3]["id"], replies[3]["error"]["code"]), (2, -32601))
        self.assertTrue(replies[4]["result"]["isError"])
        self.assertIn("there is no index at", replies[4]["result"]["content"][0]["text"])
        self.assertIn("warpfold mcp: serving", proc.stderr)


if __name__ == "__main__":
    unittest.main()
