// warpfold's UI: loads the state once, then follows live events.

import "uplot/dist/uPlot.min.css";
import "../style.css";

import { $ } from "./dom";
import { store } from "./store";
import { createTransport, forgetSession, hasSession, signIn, takeToken, type Connection } from "./transport";
import { ApiError } from "./types";
import { mountBins } from "./views/bins";
import { mountDetail } from "./views/detail";
import { mountDrop } from "./views/drop";
import { mountHeader, showConnection } from "./views/header";
import { mountQueue } from "./views/queue";
import { mountAsk } from "./views/ask";
import { mountSearch } from "./views/search";
import { mountSettings } from "./views/settings";
import { mountLibrary } from "./views/library";
import { whileStarting } from "./views/starting";
import { mountThroughput } from "./views/throughput";
import { showError, whenUnauthorized } from "./views/toast";

const transport = createTransport();

const UNTRUSTED_SCREEN =
  "the server now at this address could not prove it holds the token this page signed in with: it was restarted with a new token, or it is another program, and nothing was sent to it. Sign in again only with the token the warpfold you started printed.";

/** The sign-in screen; `reason` says why the page is here when it is not simply a first visit. */
function tokenScreen(reason?: string): void {
  forgetSession();
  $("app").hidden = true;
  $("token-screen").hidden = false;
  document.title = "warpfold · token missing or wrong";
  const why = $("token-reason");
  why.hidden = !reason;
  why.textContent = reason ? `${reason[0].toUpperCase()}${reason.slice(1)}` : "";
  const form = $("token-form") as HTMLFormElement;
  const input = $("token-input") as HTMLInputElement;
  input.focus();
  form.onsubmit = (e) => {
    e.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    signIn(token).then(
      () => location.reload(),
      (err) => {
        why.hidden = false;
        why.textContent = err instanceof ApiError && err.unauthorized ? "That token is not this server's." : String((err as Error).message ?? err);
      },
    );
  };
}

async function start(): Promise<void> {
  document.documentElement.dataset.transport = transport.kind;
  whenUnauthorized((reason) => tokenScreen(reason));
  if (transport.kind === "http") {
    const token = takeToken();
    if (token !== null) {
      try {
        await signIn(token);
      } catch (e) {
        return tokenScreen(e instanceof ApiError && !e.unauthorized ? e.message : undefined);
      }
    }
    if (!hasSession()) return tokenScreen();
  }
  if (transport.kind === "tauri") await whileStarting();
  let initial;
  try {
    initial = await transport.state();
  } catch (e) {
    if (e instanceof ApiError && e.unauthorized) return tokenScreen(e.message);
    $("app").hidden = false;
    showError(e, "Loading the state");
    setTimeout(() => location.reload(), 5000);
    return;
  }
  $("app").hidden = false;

  const openDetail = mountDetail(transport);
  mountHeader(transport);
  mountQueue(openDetail, transport);
  mountBins();
  mountThroughput();
  mountSearch(transport, openDetail);
  mountSettings(transport);
  mountLibrary(transport, openDetail);
  mountAsk(transport, openDetail);
  mountDrop(transport);
  store.load(initial);

  // events that happened between the first load and the stream's start: load again once it is live
  let gap = true;
  let reloading = false;
  const reload = () => {
    if (reloading) return;
    reloading = true;
    transport
      .state()
      .then((s) => store.load(s), () => undefined)
      .finally(() => (reloading = false));
  };
  transport.subscribe({
    queue: (f) => store.file(f),
    bin: (b) => store.bin(b),
    sample: (s) => store.sample(s),
    folders: (f) => store.setFolders(f),
    removed: (path) => store.removeFile(path),
    summary: (e) => store.summaryReady(e.path),
    writes_stopped: (reason) => store.stopWrites(reason),
    writes_paused: (reason) => store.pauseWrites(reason),
    paused: (paused) => store.setPaused(paused),
    summarizer_status: (status) => store.summarizerStatus(status),
    resync: reload,
    connection: (c: Connection) => {
      showConnection(c);
      if (c === "unauthorized") tokenScreen();
      if (c === "untrusted") tokenScreen(UNTRUSTED_SCREEN);
      if (c === "reconnecting") gap = true;
      if (c === "live" && gap) {
        // events were missed while the stream was down: take the whole state again
        gap = false;
        reload();
      }
    },
  });
}

void start();
