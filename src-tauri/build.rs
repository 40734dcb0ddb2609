fn main() {
    // Only the app's own commands, each behind a permission the capability grants by name.
    let commands = &[
        "starting",
        "state",
        "add_folder",
        "remove_folder",
        "add_paths",
        "search",
        "ask",
        "document",
        "open_file",
        "summarize",
        "settings",
        "save_settings",
        "forget",
        "subscribe_samples",
        "pause",
        "resume",
        "reindex",
        "library",
    ];
    tauri_build::try_build(tauri_build::Attributes::new().app_manifest(tauri_build::AppManifest::new().commands(commands)))
        .expect("tauri build step");
}
