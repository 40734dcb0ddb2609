//! Generated documents whose subject and key facts are known, to judge summaries by.
//!
//! Why generated: a summary can only be scored against what the document is known to say. Each
//! document here is about one subject, names it in its title, its opening and throughout, and
//! states five key facts (a name, a date, an amount, ...), one each, spread over its pages: the
//! first in the opening, the others at about a fifth, two fifths, three fifths and four fifths of
//! the way, so that a long document's facts sit in different map-reduce chunks and a summary of
//! the opening alone cannot hold them all. Between them runs on-topic filler built from a seed:
//! plain, repetitive report prose, the kind that made the greedy decoder loop (issue 15).
//!
//! Used by `tests/summary_quality.rs` and by `examples/summary_settings.rs` (the measurement
//! behind the defaults of `SummarizeOptions`).

#![allow(dead_code)]

/// A key fact: the sentence the document states, and the spellings that count as a summary
/// holding it (any one, case-insensitive).
pub struct Fact {
    pub sentence: &'static str,
    pub accept: &'static [&'static str],
}

struct Topic {
    title: &'static str,
    /// Words of which a summary naming the subject contains at least one (lowercase).
    subject_words: &'static [&'static str],
    opening: &'static str,
    facts: [Fact; 5],
    closing: &'static str,
    sections: &'static [&'static str],
    /// Slot fillers of the filler sentences.
    groups: &'static [&'static str],
    things: &'static [&'static str],
    details: &'static [&'static str],
    short: &'static str,
}

/// A generated document and what it is known to say.
pub struct KnownDocument {
    pub title: &'static str,
    pub subject_words: &'static [&'static str],
    pub facts: &'static [Fact; 5],
    pub text: String,
}

/// The filler: `{g}` a group, `{t}` a thing, `{d}` a detail, `{m}` a month, `{s}` the short subject,
/// `{n}` a small count.
const FILLER: &[&str] = &[
    "In {m}, the {g} examined the {t} and noted {d}.",
    "The {g} met every week to review progress on the {t}.",
    "A note from the {g} described {d} in the {t}.",
    "Work on the {t} continued through {m} without major delays.",
    "The {g} recommended further checks of the {t} before the next phase of {s}.",
    "According to the {g}, the {t} needed {n} more inspections.",
    "Residents asked about {d}, and the {g} answered in a public letter in {m}.",
    "Spending on the {t} stayed within the planned limits for the period.",
    "The {g} kept a log of {d} for every week of {s}.",
    "Photographs of the {t} taken in {m} are kept in the project archive.",
    "The {g} and the {h} agreed on a schedule for the {t}.",
    "No accidents were reported while the {g} worked on the {t}.",
    "The plan for {s} was updated after the {g} reported {d}.",
    "Weather in {m} slowed work on the {t} for {n} days.",
    "The {h} checked the figures of the {g} and found them correct.",
    "Suppliers delivered the parts for the {t} on time in {m}.",
    "The {g} trained {n} new staff to work on the {t}.",
    "A second review of the {t} confirmed {d}.",
    "The {h} asked the {g} to report on the {t} once a month.",
    "Minutes of every meeting about {s} were shared with the {h}.",
];

const MONTHS: &[&str] = &["January", "February", "April", "May", "June", "July", "August", "October", "November", "December"];
const COUNTS: &[&str] = &["two", "three", "four", "five", "six", "seven", "eight", "nine"];

const TOPICS: [Topic; 3] = [
    Topic {
        title: "Report on the Renovation of the Aldmoor River Bridge",
        subject_words: &["bridge"],
        opening: "This report describes the renovation of the Aldmoor River Bridge, the old stone and steel \
                  bridge that carries the main road of Aldmoor across the river. The bridge had been closed \
                  to heavy traffic after inspectors found damage to its deck and piers.",
        facts: [
            Fact { sentence: "The renovation of the bridge cost 4.2 million euros in total.", accept: &["4.2 million", "4,2 million"] },
            Fact { sentence: "The chief engineer of the bridge renovation was Maria Lindqvist.", accept: &["lindqvist"] },
            Fact { sentence: "Work on the bridge began in March 2019.", accept: &["march 2019", "march of 2019"] },
            Fact {
                sentence: "The renovated bridge reopened to all traffic in September 2021.",
                accept: &["september 2021", "september of 2021"],
            },
            Fact { sentence: "After the reopening, 11,000 vehicles crossed the bridge every day.", accept: &["11,000", "11000", "11 000"] },
        ],
        closing: "In conclusion, the renovation of the Aldmoor River Bridge restored a safe crossing for the town.",
        sections: &["Background", "Inspection of the Bridge", "Design", "Construction", "Traffic", "Budget", "Outcome"],
        groups: &["survey team", "site crew", "design office", "inspection unit", "steel contractor"],
        things: &["bridge deck", "east pier", "bearings", "railings", "drainage channels", "west abutment", "steel girders"],
        details: &["minor rust", "cracks in the surface layer", "loose paving stones", "water damage", "worn joints"],
        short: "the bridge renovation",
    },
    Topic {
        title: "Results of the Veltrazine Migraine Trial",
        subject_words: &["migraine", "veltrazine"],
        opening: "This document reports the results of a clinical trial of Veltrazine, a new drug meant to \
                  prevent migraine attacks in adults. Patients in the trial took Veltrazine or a placebo every \
                  day and recorded their migraine attacks in a diary.",
        facts: [
            Fact { sentence: "The migraine trial enrolled 412 patients.", accept: &["412"] },
            Fact { sentence: "The trial was run at 14 hospitals.", accept: &["14 hospitals", "fourteen hospitals"] },
            Fact { sentence: "The trial was led by Dr. Tomas Okafor.", accept: &["okafor"] },
            Fact {
                sentence: "Patients taking Veltrazine had 38 percent fewer migraine attacks than those on placebo.",
                accept: &["38 percent", "38%", "38 per cent"],
            },
            Fact { sentence: "The most common side effect of Veltrazine was a mild skin rash.", accept: &["rash"] },
        ],
        closing: "In conclusion, the trial found that Veltrazine can help adults who suffer from migraine.",
        sections: &["Background", "Patients", "Methods", "Treatment", "Results", "Safety", "Discussion"],
        groups: &["study nurses", "trial office", "safety board", "data team", "pharmacy staff"],
        things: &["patient diaries", "dosing schedule", "blood tests", "follow-up visits", "consent forms", "headache scores"],
        details: &["missing diary entries", "late visits", "small dosing errors", "changes in sleep", "mild headaches"],
        short: "the trial",
    },
    Topic {
        title: "Annual Report of Harbin Valves",
        subject_words: &["harbin", "valve"],
        opening: "This is the annual report of Harbin Valves, a company that makes industrial valves for \
                  water plants and refineries. It covers the company's sales, its factories and its staff \
                  over the past year.",
        facts: [
            Fact { sentence: "Harbin Valves earned revenue of 86 million dollars this year.", accept: &["86 million", "$86"] },
            Fact {
                sentence: "Sales of Harbin Valves grew by 12 percent compared with last year.",
                accept: &["12 percent", "12%", "12 per cent"],
            },
            Fact { sentence: "Harbin Valves opened a new factory in Porto.", accept: &["porto"] },
            Fact { sentence: "The chief executive of Harbin Valves is Elena Varga.", accept: &["varga"] },
            Fact { sentence: "Harbin Valves hired 240 new workers during the year.", accept: &["240"] },
        ],
        closing: "In conclusion, Harbin Valves ends the year larger and in good financial health.",
        sections: &["Overview", "Sales", "Factories", "Products", "Staff", "Finances", "Outlook"],
        groups: &["sales team", "finance office", "factory managers", "quality group", "board"],
        things: &["valve orders", "assembly lines", "export contracts", "spare parts stock", "order books", "test benches"],
        details: &["late shipments", "higher steel prices", "strong demand", "small quality faults", "new customer requests"],
        short: "the company",
    },
];

/// Number of topics [`document`] knows.
pub const TOPIC_COUNT: usize = TOPICS.len();

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

fn filler_sentence(topic: &Topic, rng: &mut Rng) -> String {
    let template = rng.pick(FILLER);
    let g = rng.pick(topic.groups);
    let h = topic.groups.iter().copied().find(|&x| x != g).unwrap_or(g);
    let h = if rng.next().is_multiple_of(2) { h } else { topic.groups.iter().rev().copied().find(|&x| x != g).unwrap_or(g) };
    let s = template
        .replace("{g}", g)
        .replace("{h}", h)
        .replace("{t}", rng.pick(topic.things))
        .replace("{d}", rng.pick(topic.details))
        .replace("{m}", rng.pick(MONTHS))
        .replace("{n}", rng.pick(COUNTS))
        .replace("{s}", topic.short);
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => s,
    }
}

/// Document `topic` (0..[`TOPIC_COUNT`]) of about `words` words (at least its opening, facts and
/// closing), from `seed`: title, opening, sections of paragraphs, closing.
pub fn document(topic: usize, words: usize, seed: u64) -> KnownDocument {
    let t = &TOPICS[topic % TOPICS.len()];
    let mut rng = Rng(seed ^ (topic as u64).wrapping_mul(0xA076_1D64_78BD_642F));
    // Paragraphs of filler, 4-7 sentences of about 12 words.
    let filler_words = words.saturating_sub(120);
    let paragraphs = (filler_words / 70).max(4);
    let mut body: Vec<String> = (0..paragraphs)
        .map(|_| {
            let n = 4 + (rng.next() % 4) as usize;
            (0..n).map(|_| filler_sentence(t, &mut rng)).collect::<Vec<_>>().join(" ")
        })
        .collect();
    // Facts 1-4 at 1/5 .. 4/5 of the body, each in the middle of its paragraph.
    for (k, fact) in t.facts.iter().enumerate().skip(1) {
        let p = (paragraphs * k / 5).min(paragraphs - 1);
        let mut sentences: Vec<&str> = body[p].split_inclusive(". ").collect();
        let at = sentences.len() / 2;
        let with_space = format!("{} ", fact.sentence);
        sentences.insert(at, &with_space);
        body[p] = sentences.concat();
    }
    // Sections: the body's paragraphs in even runs under numbered headings.
    let per_section = paragraphs.div_ceil(t.sections.len()).max(1);
    let mut text = format!("{}\n\n{} {}\n\n", t.title, t.opening, t.facts[0].sentence);
    for (i, run) in body.chunks(per_section).enumerate() {
        let heading = t.sections.get(i).copied().unwrap_or("Further Notes");
        text.push_str(&format!("{}. {}\n\n", i + 1, heading));
        for p in run {
            text.push_str(p);
            text.push_str("\n\n");
        }
    }
    text.push_str(t.closing);
    text.push('\n');
    KnownDocument { title: t.title, subject_words: t.subject_words, facts: &t.facts, text }
}

impl KnownDocument {
    /// Whether `summary` names the subject.
    pub fn names_subject(&self, summary: &str) -> bool {
        let s = summary.to_lowercase();
        self.subject_words.iter().any(|w| s.contains(w))
    }

    /// The key facts `summary` holds (their indices).
    pub fn facts_in(&self, summary: &str) -> Vec<usize> {
        let s = summary.to_lowercase();
        (0..self.facts.len()).filter(|&i| self.facts[i].accept.iter().any(|a| s.contains(&a.to_lowercase()))).collect()
    }

    /// Whether any 4 words in a row occur 3 times or more in `summary` (the judge's own count, so
    /// that a test does not trust the detector it tests).
    pub fn loops(summary: &str) -> bool {
        let words: Vec<String> = summary
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase())
            .filter(|w| !w.is_empty())
            .collect();
        let mut counts = std::collections::HashMap::new();
        words.windows(4).any(|g| {
            let c = counts.entry(g).or_insert(0);
            *c += 1;
            *c >= 3
        })
    }

    /// The share of the summary's word 6-grams found verbatim in the document's first 150 words:
    /// near 1.0 when the "summary" is a copy of the opening.
    pub fn copied_from_opening(&self, summary: &str) -> f64 {
        let norm = |s: &str| -> Vec<String> {
            s.split_whitespace().map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase()).filter(|w| !w.is_empty()).collect()
        };
        let opening: Vec<String> = norm(&self.text).into_iter().take(150).collect();
        let grams: std::collections::HashSet<&[String]> = opening.windows(6).collect();
        let summary = norm(summary);
        let mine: Vec<&[String]> = summary.windows(6).collect();
        if mine.is_empty() {
            return 0.0;
        }
        mine.iter().filter(|g| grams.contains(*g)).count() as f64 / mine.len() as f64
    }
}
