//! Who wrote a letter, and to whom: told to the model with the letter.
//!
//! Why: a letter says "I" and "you", and names its writer only under the closing formula and its
//! recipient only in the address block. A small model reads the first name it meets as the one
//! who acts: summarizing a French tenant's notice, it wrote that the landlord, whose name heads
//! the letter, ends the lease (bench/results/2026-12-07-epyc4-real-texts). Both names are in the
//! letter, so the figure-and-name check ([`crate::grounding`]) cannot see the error; told who is
//! who, the model need not guess.
//!
//! How: the writer is the name under the last closing formula ("Yours sincerely", "Veuillez
//! agréer", "Mit freundlichen Grüßen", ...), a `From:` line, or a name on its last lines; the
//! recipient is a name of the lines before the salutation ("Dear ...", "Madame,"), preferring the one the salutation names, or a
//! `To:` / `Attn.` line. A text with neither a salutation nor a `From:` line is no letter; a
//! letter whose writer is not found gets nothing (a wrong name would be worse than none).

/// A letter's writer, with the role written under the signature when there is one ("Chief
/// Technology Officer"), and when found its recipient, as the letter writes their names (titles
/// such as "Ms" or "Madame" left out). The recipient's role is not told: given "Petronella
/// Vuković (Property Manager)", the model made the tenant who wrote to her "a property manager".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LetterParties {
    pub writer: Party,
    pub recipient: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Party {
    pub name: String,
    pub role: Option<String>,
}

impl std::fmt::Display for Party {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.role {
            Some(role) => write!(f, "{} ({role})", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl LetterParties {
    /// The sentence told to the model, in English as the instructions are: " This letter was
    /// written by Julien Moreau and is addressed to Claire Dubois." (Worded so that it is not
    /// copied: "the \"I\" of the letter" came back in a Spanish summary as `la "I" del texto`;
    /// "The writer of this letter is ...; it is addressed to ..." had the French letter summarized
    /// in its own first person, opening on the recipient's name.)
    pub fn sentence(&self) -> String {
        match &self.recipient {
            Some(to) => format!(" This letter was written by {} and is addressed to {to}.", self.writer),
            None => format!(" This letter was written by {}.", self.writer),
        }
    }
}

/// How a salutation begins, in the languages the summaries are written in.
const SALUTATIONS: &[&str] = &[
    "dear ",
    "hello ",
    "hi ",
    "madame",
    "monsieur",
    "mesdames",
    "messieurs",
    "cher ",
    "chère ",
    "sehr geehrte",
    "liebe ",
    "lieber ",
    "hallo ",
    "estimado",
    "estimada",
    "querido",
    "querida",
    "señor",
    "señora",
    "gentile",
    "egregio",
    "egregia",
    "caro ",
    "cara ",
    "уважаем",
    "дорог",
    "здравствуйте",
    "geachte",
    "beste ",
    "prezado",
    "prezada",
];

/// Most lines (not blank) of a text read as a letter: an annual report opens with one, and is
/// no letter.
const MOST_LINES: usize = 80;

/// Salutations that are titles, and so also begin the name heading an address.
const TITLE_SALUTATIONS: &[&str] = &["madame", "monsieur", "mesdames", "messieurs", "señor", "señora"];

/// How a closing formula begins.
const CLOSINGS: &[&str] = &[
    "yours sincerely",
    "yours faithfully",
    "yours truly",
    "sincerely",
    "kind regards",
    "best regards",
    "warm regards",
    "regards",
    "best wishes",
    "with thanks",
    "thanks",
    "thank you",
    "veuillez agréer",
    "veuillez recevoir",
    "je vous prie",
    "cordialement",
    "bien cordialement",
    "salutations",
    "bien à vous",
    "mit freundlichen grüßen",
    "mit freundlichen grüssen",
    "freundliche grüße",
    "viele grüße",
    "beste grüße",
    "atentamente",
    "saludos",
    "un saludo",
    "cordiali saluti",
    "distinti saluti",
    "cordialmente",
    "с уважением",
    "met vriendelijke groet",
    "atenciosamente",
    "com os melhores cumprimentos",
];

/// Titles before a name, left out of the name told to the model.
const TITLES: &[&str] = &[
    "mr", "mrs", "ms", "miss", "mx", "dr", "prof", "madame", "monsieur", "mme", "mlle", "m", "herr", "frau", "sr", "sra", "srta", "don",
    "doña", "sig", "sig.ra", "signor", "signora", "dott", "dott.ssa",
];

/// Words a name holds in small letters.
const PARTICLES: &[&str] =
    &["de", "du", "des", "van", "von", "der", "den", "da", "di", "del", "della", "la", "le", "y", "bin", "al", "dos"];

/// Header fields that name the writer and the recipient.
const FROM_FIELDS: &[&str] = &["from:", "de :", "de:", "von:", "от:", "da:"];
const TO_FIELDS: &[&str] =
    &["to:", "à :", "à:", "an:", "para:", "a:", "кому:", "attn.", "attn:", "attention:", "à l'attention de", "z. hd."];

/// `line` with its leading titles left out ("Frau Dr. Katrin Weber" → "Katrin Weber").
fn without_title(line: &str) -> &str {
    let mut line = line.trim();
    while let Some((first, rest)) = line.split_once(char::is_whitespace) {
        if !TITLES.contains(&first.trim_end_matches('.').to_lowercase().as_str()) {
            break;
        }
        line = rest.trim_start();
    }
    line
}

/// The person's name `line` is, when it is one: one to four words (two or more unless `single` is
/// allowed), each capitalized (initials and hyphens allowed) or a particle ("de"), no digits, not
/// all in capitals (a company's heading). Titles before it are left out; so is what follows a
/// comma ("Petronella Vuković, Property Manager") and an address in angle brackets. Two people
/// joined by "and" are both named ("Mr Rufus Abiodun-Grey and Mrs Clementine Abiodun-Grey").
fn name_in(line: &str, single: bool) -> Option<String> {
    titled_name_in(line, single).map(|(name, _)| name)
}

/// [`name_in`], and whether a title stood before the name (Ms, Madame, Herr: a person for sure).
fn titled_name_in(line: &str, single: bool) -> Option<(String, bool)> {
    let line = line.split(['<', ',', '(']).next()?.trim();
    let mut names = Vec::new();
    let mut titled = false;
    for part in line.split(" and ").flat_map(|p| p.split(" et ")).flat_map(|p| p.split(" und ")) {
        let name = without_title(part);
        titled |= name.len() < part.trim().len();
        names.push(one_name(name, single)?);
    }
    (!names.is_empty()).then(|| (names.join(" and "), titled))
}

fn one_name(name: &str, single: bool) -> Option<String> {
    let words: Vec<&str> = name.split_whitespace().collect();
    if words.is_empty() || words.len() > 4 || (words.len() == 1 && !single) || name.chars().count() > 50 {
        return None;
    }
    let capitalized = |w: &str| {
        let mut chars = w.chars();
        chars.next().is_some_and(char::is_uppercase) && chars.all(|c| c.is_alphabetic() || matches!(c, '-' | '\'' | '’' | '.'))
    };
    let named = words.iter().all(|w| capitalized(w) || PARTICLES.contains(w)) && capitalized(words[0]);
    let shouting = name.chars().filter(|c| c.is_alphabetic()).all(char::is_uppercase);
    (named && !shouting).then(|| words.join(" "))
}

/// The value of a header field (`From: Mateus Fairclough-Adjei`) when `line` is one of `fields`.
fn field<'a>(line: &'a str, fields: &[&str]) -> Option<&'a str> {
    let lower = line.trim().to_lowercase();
    let field = fields.iter().find(|f| lower.starts_with(*f))?;
    // the field's bytes are the line's (lowercasing kept their lengths for these fields)
    line.trim().get(field.len()..).map(str::trim)
}

/// Whether `text` reads as a role (`Property Manager`, `landlord`, `VP of Engineering`): a few
/// words of letters, no figure, no address.
fn is_role(text: &str) -> bool {
    let words = text.split_whitespace().count();
    (1..=6).contains(&words)
        && text.chars().count() <= 60
        && text.chars().any(char::is_alphabetic)
        && !text.contains(|c: char| c.is_numeric() || matches!(c, '@' | ':' | '|' | '·' | '/'))
        && !starts_with_any(text, CLOSINGS)
}

/// The role after a name's comma on its line ("Orlaith Vantongeren, landlord").
fn role_after_comma(line: &str) -> Option<String> {
    let (_, rest) = line.split_once(',')?;
    let rest = rest.trim();
    is_role(rest).then(|| rest.to_string())
}

fn starts_with_any(line: &str, starts: &[&str]) -> bool {
    let lower = line.trim().to_lowercase();
    starts.iter().any(|s| lower.starts_with(s))
}

/// The writer and recipient of `text` when it is a letter (see the module docs).
pub fn letter_parties(text: &str) -> Option<LetterParties> {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    // a letter is a few pages at most, and greets its reader before its twentieth line
    if lines.len() > MOST_LINES {
        return None;
    }
    let head = &lines[..lines.len().min(20)];
    // a salutation is short and ends on a comma, a colon or an exclamation mark, or has few words;
    // one that is a title ("Madame,") is a title alone or punctuated, or it would be the name
    // heading the address ("Madame Claire Dubois")
    let salutation = head.iter().position(|l| {
        let words = l.split_whitespace().count();
        let punctuated = l.ends_with([',', ':', '!']);
        let short = if starts_with_any(l, TITLE_SALUTATIONS) { words <= 2 } else { words <= 8 };
        starts_with_any(l, SALUTATIONS) && l.chars().count() <= 60 && (punctuated || short)
    });
    let from =
        head.iter().find_map(|l| field(l, FROM_FIELDS)).and_then(|v| Some(Party { name: name_in(v, true)?, role: role_after_comma(v) }));
    if salutation.is_none() && from.is_none() {
        return None;
    }
    // the name under the last closing formula, among the last lines, and the role on the line
    // under it
    let signed_at = |at: usize, line: &str| {
        Some(Party { name: name_in(line, true)?, role: lines.get(at + 1).filter(|l| is_role(l)).map(|l| l.to_string()) })
    };
    let tail_start = lines.len().saturating_sub(12);
    let signed = lines[tail_start..]
        .iter()
        .rposition(|l| starts_with_any(l, CLOSINGS) && l.chars().count() <= 120)
        .and_then(|at| (tail_start + at + 1..lines.len()).take(3).find_map(|i| signed_at(i, lines[i])));
    // a letter that closes without a formula ("Welcome aboard!") is signed on one of its last lines
    let signed = signed.or_else(|| {
        salutation?;
        (lines.len().saturating_sub(3)..lines.len()).rev().find_map(|i| signed_at(i, lines[i]).filter(|p| p.name.contains(' ')))
    });
    let writer = match (signed, from) {
        // "Thanks, Benedetta" under a "From: Benedetta Oyelowo-Frisch" header: the full name
        (Some(signed), Some(from)) if from.name.split_whitespace().next() == signed.name.split_whitespace().next() => {
            Party { name: from.name, role: from.role.or(signed.role) }
        }
        (Some(signed), _) => signed,
        (None, Some(from)) => from,
        (None, None) => return None,
    };
    let someone_else = |n: &String| n != &writer.name && !writer.name.contains(n.as_str());
    let before_salutation = &head[..salutation.unwrap_or(head.len().min(12))];
    let addressed = head.iter().find_map(|l| field(l, TO_FIELDS)).and_then(|v| name_in(v, false)).filter(someone_else);
    let candidates: Vec<(String, bool)> = before_salutation
        .iter()
        .filter_map(|l| titled_name_in(field(l, TO_FIELDS).unwrap_or(l), false))
        .filter(|(n, _)| someone_else(n))
        .collect();
    // the salutation's own words, to tell which candidate it greets ("Dear Adaeze,")
    let greeted: Vec<String> = salutation
        .map(|at| head[at].split(|c: char| !c.is_alphabetic() && c != '-').filter(|w| w.len() > 1).map(str::to_lowercase).collect())
        .unwrap_or_default();
    let greets = |name: &str| name.split_whitespace().any(|w| greeted.contains(&w.to_lowercase()));
    // the one the salutation greets; else a To: line's; else the one titled name ("Madame ...")
    let titled: Vec<&String> = candidates.iter().filter(|(_, titled)| *titled).map(|(n, _)| n).collect();
    let recipient = candidates
        .iter()
        .find(|(n, _)| greets(n))
        .map(|(n, _)| n.clone())
        .or(addressed)
        .or_else(|| (titled.len() == 1).then(|| titled[0].clone()));
    Some(LetterParties { writer, recipient })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parties(text: &str) -> Option<(String, Option<String>)> {
        letter_parties(text).map(|p| (p.writer.name, p.recipient))
    }

    fn named(writer: &str, recipient: &str) -> Option<(String, Option<String>)> {
        Some((writer.to_string(), Some(recipient.to_string())))
    }

    /// The French notice the model misread: the landlord's name heads it, the tenant signs it.
    #[test]
    fn a_french_letter_is_written_by_its_signer_to_the_name_that_heads_it() {
        let letter = "Madame Claire Dubois\n12 rue des Lilas\n69003 Lyon\n\nLyon, le 14 mars 2026\n\n\
            Objet : résiliation du bail de l’appartement du 3e étage\n\nMadame,\n\n\
            Par la présente, je vous informe de ma décision de résilier le bail.\n\n\
            Veuillez agréer, Madame, l’expression de mes salutations distinguées.\n\nJulien Moreau";
        assert_eq!(parties(letter), named("Julien Moreau", "Claire Dubois"));
        assert_eq!(
            letter_parties(letter).unwrap().sentence(),
            " This letter was written by Julien Moreau and is addressed to Claire Dubois."
        );
    }

    #[test]
    fn letters_of_companies_and_people_in_several_languages() {
        // a company's heading in capitals, a line that is no name, the salutation's first name
        let offer = "LANTERNFISH ANALYTICS LTD\n2 Cordwainer Street, Manchester M1 4PZ\n\n9 February 2026\n\n\
            Private and confidential\nMs Adaeze Holmgren-Pike\n31 Whitworth Avenue\nStockport SK4 2JE\n\nDear Adaeze,\n\n\
            I am delighted to offer you the position. Reporting to: Thaddeus Okafor-Lund.\n\n\
            Yours sincerely,\n\nPriyanka Vellacott\nChief Technology Officer";
        assert_eq!(parties(offer), named("Priyanka Vellacott", "Adaeze Holmgren-Pike"));
        // header fields, an Attn. line with the recipient's role after a comma
        let complaint = "From: Mateus Fairclough-Adjei\nFlat 8, Coleridge Court, 40 Wellington Road, Sheffield S10 3BN\n\n\
            To: Lindqvist & Harrow Residential Management\n Attn. Ms Petronella Vuković, Property Manager\n 7 Campo Lane\n\n\
            Dear Ms Vuković,\n\nI first reported damp on 9 October 2025.\n\nYours sincerely,\nMateus Fairclough-Adjei";
        assert_eq!(parties(complaint), named("Mateus Fairclough-Adjei", "Petronella Vuković"));
        // the writer's role under the signature, or after the name in a From: line
        assert_eq!(
            letter_parties(offer).unwrap().sentence(),
            " This letter was written by Priyanka Vellacott (Chief Technology Officer) and is addressed to Adaeze Holmgren-Pike."
        );
        let notice = "To: Declan Farrow-Osei\nFrom: Orlaith Vantongeren, landlord\n\nDear Mr Farrow-Osei,\n\nThe rent is reviewed.\n\n\
            Yours sincerely,\n\nOrlaith Vantongeren";
        assert_eq!(letter_parties(notice).unwrap().writer.role.as_deref(), Some("landlord"));
        // an e-mail signed with a first name: the header's full name
        let email = "From: Benedetta Oyelowo-Frisch <b.oyelowo-frisch@marrowind.example>\nTo: Conference team <team@x.example>\n\
            Subject: Travel to Lisbon\n\nHi all,\n\nThe flights are booked.\n\nThanks,\nBenedetta";
        assert_eq!(parties(email), Some(("Benedetta Oyelowo-Frisch".to_string(), None)));
        let spanish = "BIOLUMEN IBÉRICA S.L.\nParque Científico de Valencia\n\nPaterna, 3 de marzo de 2026\n\n\
            Sra. Itziar Montalbán-Okeke\nAvenida del Puerto 212, 4º B\n46023 Valencia\n\nEstimada Sra. Montalbán-Okeke:\n\n\
            Nos complace ofrecerle el puesto.\n\nAtentamente,\n\nCovadonga Pereira-Haddad\nDirectora de Recursos Humanos";
        assert_eq!(parties(spanish), named("Covadonga Pereira-Haddad", "Itziar Montalbán-Okeke"));
        let german = "Jonas Albrecht\nLindenstraße 4\n10115 Berlin\n\nFrau Dr. Katrin Weber\nHausverwaltung Weber\n\n\
            Berlin, 2. März 2026\n\nSehr geehrte Frau Dr. Weber,\n\nhiermit kündige ich den Mietvertrag.\n\n\
            Mit freundlichen Grüßen\n\nJonas Albrecht";
        assert_eq!(parties(german), named("Jonas Albrecht", "Katrin Weber"));
    }

    #[test]
    fn texts_that_are_no_letter_or_name_no_writer_get_nothing() {
        let lease = "RESIDENTIAL TENANCY AGREEMENT\nLandlord: Marguerite Okonkwo\nTenant: Julien Moreau\n\n\
            The rent is 850 euros per month.";
        assert_eq!(parties(lease), None);
        let unsigned = "Dear customer,\n\nYour parcel arrives on Monday.\n\nKind regards,\nThe delivery team at Parcelo";
        assert_eq!(parties(unsigned), None, "a team is no person's name");
        assert_eq!(name_in("Private and confidential", false), None);
        assert_eq!(name_in("CALDERWICK BANK", false), None);
        assert_eq!(name_in("Tel. 963 544 718", false), None);
        assert_eq!(name_in("Ludwig van Beethoven", false).as_deref(), Some("Ludwig van Beethoven"));
    }

    /// The test set's 51 documents (tests/data/facts): its ten letters and e-mails are read as
    /// their text says, the forty others (an annual report that opens with a letter among them)
    /// are no letter.
    #[test]
    fn the_letters_of_the_test_set_and_nothing_else() {
        let expected: &[(&str, &str, Option<&str>)] = &[
            ("lease-05", "Orlaith Vantongeren", Some("Declan Farrow-Osei")),
            ("offer-01", "Priyanka Vellacott", Some("Adaeze Holmgren-Pike")),
            ("offer-02", "Gwendolyn Treharne", Some("Ciarán Obuya-Hartley")),
            ("offer-03", "Harland Pryce-Osei", Some("Jun-seo Abernethy-Kwan")),
            ("complaint-01", "Rosamund Achterberg-Lowe", None),
            ("complaint-02", "Mateus Fairclough-Adjei", Some("Petronella Vuković")),
            ("bank-01", "Agnieszka Bellweather", Some("Eloise Marchbanks-Idowu")),
            ("bank-02", "Harriet Mwangi-Collister", Some("Rufus Abiodun-Grey and Clementine Abiodun-Grey")),
            ("email-01", "Benedetta Oyelowo-Frisch", None),
            ("offer-es-01", "Covadonga Pereira-Haddad", Some("Itziar Montalbán-Okeke")),
        ];
        let set = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/facts/documents.jsonl")).unwrap();
        let mut letters = 0;
        for line in set.lines() {
            let document: serde_json::Value = serde_json::from_str(line).unwrap();
            let id = document["id"].as_str().unwrap();
            let got = parties(document["text"].as_str().unwrap());
            match expected.iter().find(|(e, _, _)| *e == id) {
                Some((_, writer, recipient)) => {
                    letters += 1;
                    assert_eq!(got, Some((writer.to_string(), recipient.map(str::to_string))), "{id}");
                }
                None => assert_eq!(got, None, "{id} is no letter"),
            }
        }
        assert_eq!(letters, expected.len());
    }
}
