//! `warpfold serve`: the flags mapped onto the HTTP front (`warpfold_server`) and the app it
//! serves. The server, its guards and its API live in crates/server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use warpfold_app::launch::Front;
use warpfold_app::settings::Settings;
use warpfold_app::App;
use warpfold_server::ServerOptions;

use crate::{setup, GlobalOptions};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Where to listen (IP:PORT, or localhost:PORT); loopback only unless you say otherwise.
    #[arg(long, default_value = "127.0.0.1:8787", value_parser = parse_listen_addr)]
    pub addr: SocketAddr,
    /// The index (created if missing). Default: index.db in the data folder.
    #[arg(long, env = "WARPFOLD_DB")]
    pub db: Option<PathBuf>,
    /// Where settings (watched folders) and uploaded files are kept; the desktop app uses the same
    /// folder. Default: $XDG_DATA_HOME/warpfold (~/.local/share/warpfold).
    #[arg(long, env = "WARPFOLD_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Summarize every document once it is indexed, with the local chat model (see `warpfold
    /// summarize`); without it, documents are summarized when asked (POST /api/summarize).
    #[arg(long, env = "WARPFOLD_SUMMARIZE", value_parser = clap::builder::BoolishValueParser::new())]
    pub summarize: bool,
    /// The chat model that answers questions (POST /api/ask) and summarizes (a .gguf, a folder
    /// with one, a Hugging Face folder, a pinned model's name, or `fast`). Default: the device's
    /// (see `warpfold summarize --help`), fetched on first use.
    #[arg(long, env = "WARPFOLD_CHAT_MODEL")]
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
    /// The settings (docs/settings.md keys) given on the command line or by their variable; the
    /// others come from settings.json in the data folder ([`given_settings`]).
    #[arg(skip)]
    pub given: Vec<String>,
}

/// `--addr`: an IP address and port, or `localhost:PORT` (loopback, IPv4 as the default is). A
/// host name is refused: the server must know which interface it opens.
fn parse_listen_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let port = text.strip_prefix("localhost:").or_else(|| text.strip_prefix("LOCALHOST:"));
    match port.map(str::parse::<u16>) {
        Some(Ok(port)) => Ok(SocketAddr::from(([127, 0, 0, 1], port))),
        Some(Err(_)) => Err(format!("{text:?}: the port after localhost: is a number from 0 to 65535")),
        None => Err(format!("{text:?} is not IP:PORT: give 127.0.0.1:8787, localhost:8787, or 0.0.0.0:8787 to listen on every interface")),
    }
}

/// The keys of [`Settings`] that `matches` (serve's or settings') got from a flag or a variable.
pub fn given_settings(matches: &clap::ArgMatches) -> Vec<String> {
    use clap::parser::ValueSource;
    warpfold_app::settings::FIELDS
        .iter()
        .filter(|f| matches!(matches.value_source(f.key), Some(ValueSource::CommandLine | ValueSource::EnvVariable)))
        .map(|f| f.key.to_string())
        .collect()
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

/// The settings the flags (and their variables, or their defaults) say, every one of them.
fn from_flags(global: &GlobalOptions, args: &ServeArgs) -> Settings {
    Settings {
        data_dir: args.data_dir.clone(),
        db: args.db.clone(),
        models_dir: global.models_dir.clone(),
        model: global.model.as_ref().map(|m| m.display().to_string()),
        chat_model: args.chat_model.as_ref().map(|m| m.display().to_string()),
        summarize: Some(args.summarize),
        device: global.device.to_string(),
        vram_budget: global.vram_budget.map(|b| b.to_string()),
        bin_tokens: global.bin_tokens,
        align: global.align,
        cpu_precision: global.cpu_precision.name().to_string(),
        ocr_languages: args.ocr_languages.clone(),
        ocr_max_pages: args.ocr_limits.ocr_max_pages,
        ocr_budget_secs: args.ocr_limits.ocr_budget_secs,
    }
}

/// The app's settings: settings.json in the data folder (the desktop's file, all of it optional),
/// under what the flags and their variables give ([`ServeArgs::given`]): the one [`Settings`]
/// every front starts from (docs/settings.md). A settings.json that cannot be read is an error
/// naming it.
pub fn settings(global: &GlobalOptions, args: &ServeArgs) -> Result<Settings> {
    let data_dir = args.data_dir.clone().unwrap_or_else(warpfold_app::settings::default_data_dir);
    let mut merged = serde_json::to_value(Settings::from_file(&data_dir.join("settings.json"))?)?;
    let flags = serde_json::to_value(from_flags(global, args))?;
    for key in &args.given {
        merged[key.as_str()] = flags[key.as_str()].clone();
    }
    let settings: Settings = serde_json::from_value(merged)?;
    settings.check()?;
    Ok(settings)
}

/// `warpfold settings`: the settings in effect, the desktop app's, or the table of them all.
pub fn show_settings(global: &GlobalOptions, args: &ServeArgs, markdown: bool, desktop: bool) -> Result<ExitCode> {
    if markdown {
        print!("{}", warpfold_app::settings::markdown());
        return Ok(ExitCode::SUCCESS);
    }
    let settings = if desktop { Settings::for_desktop()? } else { settings(global, args)? };
    settings.check()?;
    for line in settings.describe() {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The app the flags describe, started the way the desktop starts it ([`warpfold_app::launch`]);
/// documents are summarized when asked, or every one with --summarize.
fn start_app(global: &GlobalOptions, args: &ServeArgs) -> Result<App> {
    let front = Front {
        exe: std::env::current_exe().context("finding the warpfold binary to run extraction workers")?,
        summarize_by_default: false,
        summary: args.summary.options(),
        locale: warpfold_app::settings::locale(),
        wrap_device: setup::engine_options(global)?.wrap_device,
        say: &|line| eprintln!("warpfold: {line}"),
    };
    Ok(warpfold_app::launch::launch(&settings(global, args)?, front)?)
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
    fn localhost_is_loopback_and_a_bad_address_says_what_to_give() {
        let addr = |text: &str| match Cli::try_parse_from(["warpfold", "serve", "--addr", text]).map(|cli| cli.command) {
            Ok(Command::Serve(args)) => Ok(args.addr.to_string()),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.to_string()),
        };
        assert_eq!(addr("localhost:8799").unwrap(), "127.0.0.1:8799");
        assert_eq!(addr("[::1]:8799").unwrap(), "[::1]:8799");
        assert_eq!(addr("0.0.0.0:80").unwrap(), "0.0.0.0:80");
        let error = addr("example.org:80").unwrap_err();
        assert!(error.contains("\"example.org:80\" is not IP:PORT: give 127.0.0.1:8787, localhost:8787"), "{error}");
        let error = addr("localhost:99999").unwrap_err();
        assert!(error.contains("the port after localhost: is a number"), "{error}");
    }

    #[test]
    fn every_setting_is_the_flag_and_variable_docs_settings_md_names() {
        use clap::CommandFactory;
        let cli = Cli::command();
        for field in warpfold_app::settings::FIELDS {
            let (command, flag) = match field.flag.split_once(' ') {
                Some((name, flag)) => (cli.find_subcommand(name).unwrap_or_else(|| panic!("no command {name}")), flag),
                None => (&cli, field.flag),
            };
            let long = flag.trim_start_matches("--");
            let arg = command.get_arguments().find(|a| a.get_long() == Some(long)).unwrap_or_else(|| panic!("no flag {}", field.flag));
            assert_eq!(arg.get_env().map(|e| e.to_string_lossy().into_owned()).as_deref(), Some(field.env), "{}", field.flag);
        }
    }

    /// `warpfold serve ARGS` parsed as main parses it: the flags, and which settings they gave.
    fn parsed(args: &[&str]) -> (GlobalOptions, ServeArgs) {
        use clap::{CommandFactory, FromArgMatches};
        let matches = Cli::command().try_get_matches_from(args).unwrap();
        let cli = Cli::from_arg_matches(&matches).unwrap();
        let Command::Serve(mut serve) = cli.command else { panic!("parsed as serve") };
        serve.given = given_settings(matches.subcommand_matches("serve").unwrap());
        (cli.global, serve)
    }

    #[test]
    fn serve_starts_from_settings_json_under_its_flags() {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().to_str().unwrap();
        let no_variables = std::env::vars().all(|(k, _)| !k.starts_with("WARPFOLD_") || k == "WARPFOLD_MODELS_DIR" || k == "WARPFOLD_LOG");
        // No file: the flags' defaults are the settings' defaults.
        let (global, args) = parsed(&["warpfold", "serve", "--data-dir", dir]);
        let plain = |s: &Settings| Settings { models_dir: None, data_dir: None, ..s.clone() };
        let defaults = settings(&global, &args).unwrap();
        if no_variables {
            assert_eq!(plain(&defaults), plain(&Settings::default()));
        }
        // The desktop's file: what it says, unless a flag says otherwise.
        std::fs::write(data.path().join("settings.json"), r#"{"folders": [], "device": "cpu", "align": 8, "ocr_languages": "eng+deu"}"#)
            .unwrap();
        let (global, args) = parsed(&["warpfold", "serve", "--data-dir", dir, "--align", "32"]);
        let merged = settings(&global, &args).unwrap();
        assert_eq!((merged.device.as_str(), merged.align, merged.ocr_languages.as_str()), ("cpu", 32, "eng+deu"));
        assert_eq!(merged.data_dir.as_deref(), Some(data.path()));
        // A file that does not read stops the start, naming the file.
        std::fs::write(data.path().join("settings.json"), r#"{"align": "wide"}"#).unwrap();
        let err = settings(&global, &args).unwrap_err().to_string();
        assert!(err.contains("settings.json") && err.contains("align"), "{err}");
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
