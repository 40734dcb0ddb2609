//! Embeds the web UI (ui/dist at the repository's root, built by `npm run build` in ui/) into the
//! server when it has been built; without it the server still runs its API and its page says how to
//! build the UI.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(ui_built)");
    let files = ["../../ui/dist/index.html", "../../ui/dist/app.js", "../../ui/dist/app.css"];
    for file in files {
        println!("cargo::rerun-if-changed={file}");
    }
    if files.iter().all(|f| std::path::Path::new(f).is_file()) {
        println!("cargo::rustc-cfg=ui_built");
    } else {
        println!("cargo::warning=ui/dist is not built: `warpfold serve` will run without its web UI (cd ui && npm ci && npm run build)");
    }
}
