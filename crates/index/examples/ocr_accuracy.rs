//! OCR accuracy and speed on generated scans: pages of known text typeset at a resolution, scanned
//! clean or noisy (turned, grainy, specked), stored in a PDF as JPEG or deflated grey as a scanner
//! would, then read back the way the extraction worker reads them (the page's own image out of the
//! PDF, then Tesseract). Prints one JSON line per setting: character accuracy against the typeset
//! text (mean and worst page), planted sentences found, pages per second on one core.
//!
//! With `--write DIR`, each setting's pages are also written as the engine gets them (the image
//! read back out of the PDF) for other engines to read: DIR/<look>-<dpi>[-flate]/page-N.png, the
//! typeset text page-N.txt, the planted sentence page-N.planted, and the resolution in `dpi`
//! (bench/ocr/compare_engines.py reads them).
//!
//! cargo run --release -p warpfold-index --example ocr_accuracy -- [PAGES] [--write DIR]

use std::time::Instant;

use warpfold_index::ocr::{pdf_page_image, Tesseract};
use warpfold_index::scangen::{self, Encoding, ScanSettings};

fn main() {
    let mut pages: usize = 6;
    let mut write: Option<std::path::PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--write" {
            write = Some(args.next().expect("--write needs a directory").into());
        } else {
            pages = arg.parse().expect("PAGES is a number");
        }
    }
    // One thread for Tesseract, as in the extraction worker: its OpenMP threads only compete.
    std::env::set_var("OMP_THREAD_LIMIT", "1");
    let font = scangen::load_font().expect("font");
    let mut engine = Tesseract::new("eng").expect("tesseract");
    eprintln!("{}", engine.describe());
    let settings: Vec<(&str, u32, Encoding)> = vec![
        ("clean", 300, Encoding::Flate),
        ("clean", 300, Encoding::Jpeg { quality: 85 }),
        ("noisy", 300, Encoding::Jpeg { quality: 85 }),
        ("clean", 200, Encoding::Jpeg { quality: 85 }),
        ("noisy", 200, Encoding::Jpeg { quality: 85 }),
        ("clean", 150, Encoding::Jpeg { quality: 85 }),
        ("noisy", 150, Encoding::Jpeg { quality: 85 }),
    ];
    let dir = std::env::temp_dir().join(format!("warpfold-ocr-accuracy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (look, dpi, encoding) in settings {
        let mut images = Vec::new();
        let mut truths = Vec::new();
        let mut planted = Vec::new();
        for i in 0..pages {
            let sentence = format!("The parcel for order {} left the depot at {} past nine.", 4100 + i * 37, 10 + i);
            let (page, printed) = scangen::typeset(&font, &scangen::page_text(i, &sentence), dpi);
            let scanned = if look == "clean" { page } else { scangen::scan(&page, &ScanSettings::noisy(dpi, i as u64)) };
            images.push(scanned);
            truths.push(printed);
            planted.push(sentence);
        }
        let pdf = scangen::scanned_pdf(&images, dpi, encoding);
        let path = dir.join("scan.pdf");
        std::fs::write(&path, &pdf).unwrap();
        let doc = lopdf::Document::load_mem(&pdf).unwrap();
        let encoding_name = match encoding {
            Encoding::Flate => "flate",
            Encoding::Jpeg { .. } => "jpeg",
        };
        if let Some(out) = &write {
            let suffix = if encoding_name == "flate" { "-flate" } else { "" };
            let setting = out.join(format!("{look}-{dpi}{suffix}"));
            std::fs::create_dir_all(&setting).expect("--write directory");
            std::fs::write(setting.join("dpi"), format!("{dpi}\n")).unwrap();
            for (i, truth) in truths.iter().enumerate() {
                let (image, _) = pdf_page_image(&doc, &pdf, i as u32 + 1, doc.get_pages()[&(i as u32 + 1)]).expect("page image");
                scangen::save_image(&image, &setting.join(format!("page-{i}.png"))).expect("page png");
                std::fs::write(setting.join(format!("page-{i}.txt")), truth).unwrap();
                std::fs::write(setting.join(format!("page-{i}.planted")), &planted[i]).unwrap();
            }
        }
        let started = Instant::now();
        let mut accuracies = Vec::new();
        let mut found = 0;
        for (i, truth) in truths.iter().enumerate() {
            let (image, page_dpi) = pdf_page_image(&doc, &pdf, i as u32 + 1, doc.get_pages()[&(i as u32 + 1)]).expect("page image");
            let read = engine.read(&image, page_dpi).expect("ocr");
            accuracies.push(scangen::character_accuracy(&read.text, truth));
            let folded = read.text.split_whitespace().collect::<Vec<_>>().join(" ");
            found += usize::from(folded.contains(&planted[i]));
        }
        let seconds = started.elapsed().as_secs_f64();
        let mean = accuracies.iter().sum::<f64>() / accuracies.len() as f64;
        let worst = accuracies.iter().cloned().fold(f64::INFINITY, f64::min);
        println!(
            "{{\"look\":\"{look}\",\"dpi\":{dpi},\"encoding\":\"{}\",\"pages\":{pages},\"accuracy_mean\":{mean:.4},\"accuracy_worst\":{worst:.4},\"planted_found\":{found},\"pages_per_second\":{:.3},\"pdf_bytes\":{}}}",
            encoding_name,
            pages as f64 / seconds,
            pdf.len()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
