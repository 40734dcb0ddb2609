//! `warpfold serve`: the flags mapped onto the HTTP front (`warpfold_server`) and the app it
//! serves. The server, its guards and its API live in crates/server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use warpfold_app::{App, AppConfig};
use warpfold_server::ServerOptions;

use crate::{setup, GlobalOptions};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Where to listen; loopback only unless you say otherwise.
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub addr: SocketAddr,
    /// The index (created if missing). Default: index.db in the data folder.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Where settings (watched folders) and uploaded files are kept; the desktop app uses the same
    /// folder. Default: $XDG_DATA_HOME/warpfold (~/.local/share/warpfold).
    #[arg(long, env = "WARPFOLD_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Summarize every document once it is indexed, with the local chat model (see `warpfold
    /// summarize`); without it, documents are summarized when asked (POST /api/summarize).
    #[arg(long)]
    pub summarize: bool,
    /// The chat model that answers questions (POST /api/ask) and summarizes (a .gguf, a folder
    /// with one, a Hugging Face folder, a pinned model's name, or `fast`). Default: the device's
    /// (see `warpfold summarize --help`), fetched on first use.
    #[arg(long)]
    pub chat_model: Option<PathBuf>,
    #[command(flatten)]
    pub summary: crate::summarize::SummaryArgs,
    /// The languages OCR reads scanned pages and images in: `auto` (each page's own), a list
    /// (e.g. eng, eng+deu), or `off`.
    #[arg(long, env = "WARPFOLD_OCR_LANGUAGES", default_value = warpfold_index::ocr::DEFAULT_LANGUAGES)]
    pub ocr_languages: String,
    #[command(flatten)]
    pub ocr_limits: crate::index::OcrLimits,
    /// The token clients must send; default: a random one, printed at start. Given on the command
    /// line it is visible to every user of the machine (/proc/PID/cmdline): prefer WARPFOLD_TOKEN
    /// or --token-file.
    #[arg(long, env = "WARPFOLD_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Read the token from this file's first line (keep it readable by you alone).
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    /// The largest upload (POST /api/upload) taken, in MiB; a larger body is answered 413.
    #[arg(long, default_value_t = 512, value_name = "MIB")]
    pub max_upload_mib: u64,
    /// A host name (without port) the server answers to besides IP addresses and localhost, for
    /// clients that reach it by name; repeatable. Requests naming any other host get 421.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_hosts: Vec<String>,
}

pub fn run(global: &GlobalOptions, args: &ServeArgs) -> Result<ExitCode> {
    serve(global, args, getrandom::fill)
}

/// [`run`] with the random number generator given (tests give one that fails).
fn serve(global: &GlobalOptions, args: &ServeArgs, random: impl FnOnce(&mut [u8]) -> Result<(), getrandom::Error>) -> Result<ExitCode> {
    let token = match &args.token_file {
        Some(file) => Some(token_from_file(file)?),
        None => {
            if std::env::args().any(|a| a == "--token" || a.starts_with("--token=")) {
                eprintln!("warning: a token given with --token is visible to every user of this machine in the process list; use WARPFOLD_TOKEN or --token-file");
            }
            args.token.clone()
        }
    };
    let options = ServerOptions {
        addr: args.addr,
        token,
        allowed_hosts: args.allow_hosts.clone(),
        max_upload_bytes: args.max_upload_mib.saturating_mul(1 << 20),
    };
    warpfold_server::serve(&options, random, || start_app(global, args))?;
    Ok(ExitCode::SUCCESS)
}

/// The first line of a token file, without its line end; an empty one is refused by the server.
fn token_from_file(file: &std::path::Path) -> Result<String> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading the token file {}", file.display()))?;
    Ok(text.lines().next().unwrap_or_default().trim().to_string())
}

/// The embedding engine, the index and the chat model's thread (answers, and summaries: of every
/// document with --summarize, else when asked), as the flags say.
fn start_app(global: &GlobalOptions, args: &ServeArgs) -> Result<App> {
    let data_dir = args.data_dir.clone().unwrap_or_else(warpfold_app::paths::default_data_dir);
    let db = args.db.clone().unwrap_or_else(|| data_dir.join("index.db"));
    let dir = setup::embedding_model_dir(global, Some(&db))?;
    let mut started = setup::start_embedder(global, &dir)?;
    let exe = std::env::current_exe().context("finding the warpfold binary to run extraction workers")?;
    let (model, device, memory) = warpfold_app::runtime::app_parts(&mut started);
    let mut config = AppConfig::new(db.clone(), data_dir, model, exe, device);
    config.memory = memory;
    config.index_options.isolation.ocr_languages =
        warpfold_index::ocr::languages_setting(&args.ocr_languages).map_err(|e| anyhow::anyhow!("--ocr-languages: {e}"))?;
    args.ocr_limits.apply(&mut config.index_options.isolation);
    {
        // A pinned chat model not fetched yet is fetched on first use, its progress in the state.
        let device = setup::backend_device(global)?;
        let (model, fetch) = warpfold_runtime::planned_chat_model(args.chat_model.as_deref(), &device, &setup::models_dir(global))?;
        config.summaries = Some(warpfold_app::summaries::SummaryConfig {
            model,
            fetch,
            device,
            auto: args.summarize,
            options: {
                let mut options = args.summary.options();
                options.check().map_err(|e| anyhow::anyhow!("summary settings: {e}"))?;
                options.vram_budget = global.vram_budget;
                options
            },
        });
    }
    App::start(config, started.embedder).with_context(|| format!("starting on the index {}", db.display()))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::{Cli, Command};

    fn failing(_: &mut [u8]) -> Result<(), getrandom::Error> {
        Err(getrandom::Error::UNSUPPORTED)
    }

    #[test]
    fn without_a_random_generator_the_server_refuses_to_start() {
        let data = tempfile::tempdir().unwrap();
        let data_dir = data.path().join("data");
        let cli = Cli::try_parse_from(["warpfold", "serve", "--addr", "127.0.0.1:0", "--data-dir", data_dir.to_str().unwrap()]).unwrap();
        let Command::Serve(mut args) = cli.command else { panic!("parsed as serve") };
        args.token = None; // whatever WARPFOLD_TOKEN says here
        let err = serve(&cli.global, &args, failing).unwrap_err().to_string();
        assert!(err.contains("random number generator failed") && err.contains("refusing to start"), "{err}");
        assert!(!data_dir.exists(), "refused before creating anything");
    }
}
