//! The bundled sample documents (`warpfold make-samples DIR`): a few short PDFs, a Markdown and a
//! text file on distinct subjects, so the first run of warpfold has something real to index and
//! an example search has an obvious right answer. Two samples are scans (one image a page, no text
//! layer): a receipt, which OCR reads, and a photo of a blank page, to show how a file with no words
//! is reported.

use std::path::{Path, PathBuf};

use crate::pdfgen::{Font, Page, PdfDocument, TextBlock};

struct Sample {
    file: &'static str,
    pages: &'static [&'static str],
}

const SAMPLES: &[Sample] = &[
    Sample {
        file: "gardening/tomatoes.pdf",
        pages: &[
            "Growing tomatoes in a small garden. Tomatoes want at least six hours of direct sun a day and \
             soil that drains well. Start seeds indoors six to eight weeks before the last frost, and move \
             the seedlings outside once night temperatures stay above ten degrees Celsius.",
            "Watering and ripening. Water deeply at the base of the plant two or three times a week rather \
             than a little every day; wet leaves invite blight. Fruit ripens fastest between twenty and \
             twenty-five degrees. A green tomato picked at the breaker stage, when the first blush of colour \
             appears, will finish ripening on a windowsill with the same flavour.",
        ],
    },
    Sample {
        file: "astronomy/moons.pdf",
        pages: &[
            "The moons of Jupiter. Galileo found the four largest in January 1610: Io, Europa, Ganymede and \
             Callisto. Io is the most volcanically active body in the solar system, heated by tides as it \
             is squeezed between Jupiter and its sister moons.",
            "Europa hides a salt-water ocean under an icy crust perhaps fifteen to twenty-five kilometres \
             thick, which makes it one of the best places to look for life beyond Earth. Ganymede is larger \
             than the planet Mercury and is the only moon known to have its own magnetic field.",
            "Observing them yourself. A pair of steady binoculars shows the Galilean moons as small points \
             of light in a line beside Jupiter; their positions change from night to night.",
        ],
    },
    Sample {
        file: "cooking/bread.pdf",
        pages: &[
            "A simple sourdough loaf. Mix 500 grams of bread flour with 350 grams of water and leave it for \
             an hour; this rest, the autolyse, lets the flour absorb the water. Then add 100 grams of active \
             starter and 10 grams of salt.",
            "Fold the dough every half hour for the first two hours, then let it rise until it has grown by \
             about half. Shape it, proof it overnight in the refrigerator, and bake it in a covered pot at \
             250 degrees for twenty minutes, then uncovered until the crust is deep brown.",
        ],
    },
    Sample {
        file: "history/railways.pdf",
        pages: &[
            "The first public railways. The Stockton and Darlington Railway opened in 1825 and carried coal \
             with steam locomotives designed by George Stephenson. The Liverpool and Manchester Railway \
             followed in 1830, the first line to run scheduled passenger trains entirely by steam.",
            "Standard gauge. The track width of four feet eight and a half inches came from the wagonways \
             of the northern English collieries, and spread with Stephenson's engines across Britain and \
             much of the world.",
        ],
    },
    Sample {
        file: "health/sleep.pdf",
        pages: &[
            "How much sleep adults need. Most adults need seven to nine hours a night. Keeping the same \
             wake-up time every day, even at weekends, steadies the body clock more than any other habit.",
            "Light and caffeine. Bright morning light helps you fall asleep earlier at night, while screens \
             late in the evening delay it. Caffeine has a half-life of about five hours, so an afternoon \
             coffee still acts at bedtime.",
        ],
    },
    Sample {
        file: "notes/bicycle-maintenance.md",
        pages: &["# Bicycle maintenance\n\nCheck tyre pressure every week: road tyres usually want 80 to 100 psi, \
                  mountain bike tyres 25 to 35 psi.\n\n## Chain\n\nClean and oil the chain every few hundred \
                  kilometres. A chain stretched beyond half a percent wears out the cassette, so measure it \
                  with a chain checker and replace it early.\n"],
    },
    Sample {
        file: "notes/coffee.txt",
        pages: &["Brewing coffee with a pour-over dripper. Use about sixty grams of coffee per litre of water, \
                  ground medium-fine, and water just off the boil at around ninety-four degrees. Pour a little \
                  first to let the grounds bloom for thirty seconds, then pour slowly in circles; the whole brew \
                  should take three to four minutes.\n"],
    },
];

/// A query the samples answer, and the file and page that answer it.
/// The scanned receipt's text (read back by OCR).
pub const RECEIPT: &str = "Harbour Hardware, 12 Quay Street. Receipt number 20417, 14 March 2026.\n\n\
    Two tins of marine varnish, 18.50 each. One boat hook, 24.00. A coil of mooring rope, 31.75.\n\n\
    Total paid by card: 92.75. Goods may be returned within thirty days with this receipt.";

pub const EXAMPLE_QUERY: &str = "when should I pick tomatoes so they ripen indoors";

/// Writes the samples under `dir`; returns the files written.
pub fn write_samples(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let fonts = [Font::Helvetica, Font::TimesRoman, Font::RemappedHelveticaBold];
    let mut written = Vec::new();
    for (i, sample) in SAMPLES.iter().enumerate() {
        let path = dir.join(sample.file);
        std::fs::create_dir_all(path.parent().expect("sample paths have a folder"))?;
        if sample.file.ends_with(".pdf") {
            let pages = sample
                .pages
                .iter()
                .enumerate()
                .map(|(p, text)| {
                    // Titles in one font, body in another: real documents mix them.
                    let font = fonts[(i + p) % fonts.len()];
                    let (title, body) = text.split_once(". ").unwrap_or(("", text));
                    let mut blocks = Vec::new();
                    if !title.is_empty() {
                        blocks.push(TextBlock { font: Font::Helvetica, text: format!("{title}.") });
                    }
                    blocks.push(TextBlock { font, text: body.to_string() });
                    Page { blocks, image: false }
                })
                .collect();
            std::fs::write(&path, PdfDocument { pages, compress: true, ..Default::default() }.to_bytes())?;
        } else {
            std::fs::write(&path, sample.pages.concat())?;
        }
        written.push(path);
    }
    let scans = dir.join("scans");
    std::fs::create_dir_all(&scans)?;
    // The receipt is typeset and scanned as a flatbed would (200 dpi, turned, grainy, JPEG); where
    // no font is installed to typeset it, it is left out and the folder says why.
    match crate::scangen::load_font() {
        Ok(font) => {
            let (page, _) = crate::scangen::typeset(&font, RECEIPT, 200);
            let scanned = crate::scangen::scan(&page, &crate::scangen::ScanSettings::noisy(200, 3));
            let path = scans.join("receipt-scan.pdf");
            std::fs::write(&path, crate::scangen::scanned_pdf(&[scanned], 200, crate::scangen::Encoding::Jpeg { quality: 80 }))?;
            written.push(path);
        }
        Err(e) => std::fs::write(scans.join("README.txt"), format!("The scanned receipt sample was not made: {e}\n"))?,
    }
    let blank = scans.join("blank-page-scan.pdf");
    std::fs::write(&blank, PdfDocument { pages: vec![Page::image_only()], compress: true, ..Default::default() }.to_bytes())?;
    written.push(blank);
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sample_is_encodable_in_its_fonts() {
        for sample in SAMPLES.iter().filter(|s| s.file.ends_with(".pdf")) {
            for page in sample.pages {
                for font in [Font::Helvetica, Font::TimesRoman, Font::RemappedHelveticaBold] {
                    assert!(font.can_encode(page), "{} cannot be written in {font:?}", sample.file);
                }
            }
        }
    }
}
