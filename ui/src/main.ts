// warpfold's UI: loads the state once, then follows live events.

import "uplot/dist/uPlot.min.css";
import "../style.css";

import { $ } from "./dom";
import { store } from "./store";
import { createTransport, hasToken, setToken, type Connection } from "./transport";
import { ApiError } from "./types";
import { mountBins } from "./views/bins";
import { mountDetail } from "./views/detail";
import { mountDrop } from "./views/drop";
import { mountHeader, showConnection } from "./views/header";
import { mountQueue } from "./views/queue";
import { mountSearch } from "./views/search";
import { mountThroughput } from "./views/throughput";
import { showError, whenUnauthorized } from "./views/toast";

const transport = createTransport();

function tokenScreen(): void {
  $("app").hidden = true;
  $("token-screen").hidden = false;
  document.title = "warpfold · token missing or wrong";
  const form = $("token-form") as HTMLFormElement;
  const input = $("token-input") as HTMLInputElement;
  input.focus();
  form.onsubmit = (e) => {
    e.preventDefault();
    if (!input.value.trim()) return;
    setToken(input.value.trim());
    location.reload();
  };
}

async function start(): Promise<void> {
  document.documentElement.dataset.transport = transport.kind;
  whenUnauthorized(tokenScreen);
  if (transport.kind === "http" && !hasToken()) {
    tokenScreen();
    return;
  }
  let initial;
  try {
    initial = await transport.state();
  } catch (e) {
    if (e instanceof ApiError && e.unauthorized) return tokenScreen();
    $("app").hidden = false;
    showError(e, "Loading the state");
    setTimeout(() => location.reload(), 5000);
    return;
  }
  $("app").hidden = false;

  const openDetail = mountDetail(transport);
  mountHeader(transport);
  mountQueue(openDetail);
  mountBins();
  mountThroughput();
  mountSearch(transport, openDetail);
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
    resync: reload,
    connection: (c: Connection) => {
      showConnection(c);
      if (c === "unauthorized") tokenScreen();
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
