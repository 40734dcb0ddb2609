//! The language of a chunk and of a query, and how far an embedding model can be trusted in it.
//!
//! Why: hybrid search fuses the keyword ranking with the nearest embeddings. An English-only model
//! (all-MiniLM-L6-v2, the default) embeds a Russian or Japanese text into noise, and fusing that
//! noise with a good keyword ranking dragged the right document down: hybrid ranked below a plain
//! keyword search outside English. So a chunk's language decides how much its place in the embeddings'
//! ranking counts ([`dense_weight`]): fully for a language the model was trained on, not at all
//! for a script it has never seen. Each chunk's language is stored too, to filter by and to show
//! what an index holds.
//!
//! Why per chunk and not (only) per query: detection (`whatlang`, trigram statistics, no model file) is
//! reliable on a chunk of a few hundred words and wrong on a query of three ("how many vacation
//! days do employees get each year" comes out French). A chunk's nearest-vector place counts by
//! the chunk's language, which for the chunks a query should find is the query's. The query's
//! script, which a few words do tell, and its language where it can be told, weigh the whole
//! ranking once more ([`query_weight`]).

use rusqlite::functions::FunctionFlags;
use rusqlite::Connection;
use whatlang::Script;

/// A text's language and script, as stored with each chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Detected {
    /// ISO 639-3 (`eng`, `deu`, `fra`, `rus`, `jpn`, `cmn`), when told with confidence.
    pub language: Option<&'static str>,
    /// The script (stored by name: `Latin`, `Cyrillic`, `Mandarin` for Han, `Hiragana`,
    /// `Hangul`, ...), when the text has letters.
    pub script: Option<Script>,
}

/// The language and script of a chunk's text.
pub fn detect(text: &str) -> Detected {
    match whatlang::detect(text) {
        Some(info) => {
            Detected { language: (info.is_reliable() || info.confidence() >= 0.5).then(|| info.lang().code()), script: Some(info.script()) }
        }
        None => Detected { language: None, script: whatlang::detect_script(text) },
    }
}

/// How much the nearest embeddings of a chunk count in hybrid search, from 0 (not at all) to 1
/// (as much as a place in the keyword rankings), given the model its vector came from and the
/// chunk's [`Detected`] language and script.
///
/// A multilingual model counts fully everywhere. An English model counts fully for English and
/// for a Latin-script text it cannot place, and not at all in another language: in another
/// script its word pieces are single letters and its nearest vectors noise; in German or French
/// (Debian's translated man pages, BENCHMARKS.md) all-MiniLM-L6-v2's nearest vectors alone reached
/// nDCG@10 0.433 and 0.468 against 0.624 and 0.692 for the keyword ranking, and fused at half
/// weight they still pulled hybrid search below the keyword ranking (0.598 and 0.673).
pub fn dense_weight(model: &str, language: Option<&str>, script: Option<&str>) -> f64 {
    if is_multilingual(model) {
        return 1.0;
    }
    match (language, script) {
        (_, Some(script)) if script != Script::Latin.name() => 0.0,
        (None | Some("eng"), _) => 1.0,
        (Some(_), _) => 0.0,
    }
}

/// How much the nearest embeddings count for `query`, 0 to 1, before each chunk's own weight
/// ([`dense_weight`]): a multilingual model's fully; an English model's not at all for a query in
/// another script (its vector is noise, and so are its nearest chunks, of any language: the
/// script is told reliably from a few words), fully for a query told as English, not at all for
/// one told with some confidence as another language, and for a query too short to tell, as much
/// as the index is English (`english_share`, [`crate::store::Store::english_share`]) when it is
/// mostly English, else not at all: a short query over English documents is most likely English,
/// over German ones German. Measured on
/// Debian's translated man pages (BENCHMARKS.md), where weighting chunks alone let the few
/// English-looking chunks of a German index take places with German queries.
pub fn query_weight(model: &str, query: &str, english_share: f64) -> f64 {
    if is_multilingual(model) {
        return 1.0;
    }
    match whatlang::detect(query) {
        None => 1.0,
        Some(info) if info.script() != Script::Latin => 0.0,
        Some(info) if info.confidence() < TOLD => {
            if english_share >= MOSTLY_ENGLISH {
                english_share.min(1.0)
            } else {
                0.0
            }
        }
        Some(info) if info.lang() == whatlang::Lang::Eng => 1.0,
        Some(_) => 0.0,
    }
}

/// Below this share of English an index's unsure queries count as not English at all: on Debian's
/// Italian man pages (16% English) their nearest vectors at 0.16 still tipped close keyword
/// rankings the wrong way (nDCG@10 0.719 against 0.776 for keywords alone).
const MOSTLY_ENGLISH: f64 = 0.5;

/// The confidence from which whatlang's language is believed for a query ("Dateien und
/// Verzeichnisse kopieren": German, 0.56; "open and possibly create a file": Romanian, 0.27;
/// "copy files and directories": English, 0.0006; short Italian queries often come out English).
const TOLD: f64 = 0.5;

/// Whether a model's name says it was trained on many languages (multilingual-e5, paraphrase-
/// multilingual, LaBSE, bge-m3).
pub fn is_multilingual(model: &str) -> bool {
    let name = model.to_ascii_lowercase();
    ["multilingual", "labse", "bge-m3", "xlm"].iter().any(|m| name.contains(m))
}

/// The English name of a language stored as ISO 639-3 (`deu` → `German`).
pub fn english_name(code: &str) -> Option<&'static str> {
    // whatlang tells written Chinese apart as Mandarin; a reader knows it as Chinese.
    whatlang::Lang::from_code(code).map(|l| if l == whatlang::Lang::Cmn { "Chinese" } else { l.eng_name() })
}

/// SQL names of [`detect`]'s two halves, as the store fills its chunks' columns with them.
pub const LANGUAGE_FUNCTION: &str = "warpfold_language";
pub const SCRIPT_FUNCTION: &str = "warpfold_script";

/// Registers [`LANGUAGE_FUNCTION`] and [`SCRIPT_FUNCTION`] on `conn` (NULL when not told).
pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC | FunctionFlags::SQLITE_INNOCUOUS;
    conn.create_scalar_function(LANGUAGE_FUNCTION, 1, flags, |ctx| Ok(detect(&ctx.get::<String>(0)?).language))?;
    conn.create_scalar_function(SCRIPT_FUNCTION, 1, flags, |ctx| Ok(detect(&ctx.get::<String>(0)?).script.map(|s| s.name().to_string())))
}

/// The language of a question, to answer it in, read beside `context` (the passage it is asked
/// of): told with confidence; or, for a question in another script than Latin, whose few words
/// whatlang cannot place with confidence, the language of a context in the same script (a
/// Russian question over a Russian passage, where the question alone may come out Bulgarian), else
/// whatlang's best guess; `None` for a short Latin-script question.
pub fn question_language(question: &str, context: &str) -> Option<&'static str> {
    let info = whatlang::detect(question)?;
    if info.is_reliable() {
        return Some(info.lang().code());
    }
    if info.script() == Script::Latin {
        return None;
    }
    // The context's best guess, confident or not: it has more words to go by than the question.
    let around = whatlang::detect(context).filter(|a| a.script() == info.script());
    Some(around.map_or(info.lang().code(), |a| a.lang().code()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_told_apart_by_language() {
        let cases = [
            ("eng", "The tenant pays a security deposit of two months' rent before moving into the flat, and the landlord returns it within thirty days of the end of the lease."),
            ("deu", "Der Mieter zahlt vor dem Einzug eine Kaution in Höhe von zwei Monatsmieten an den Vermieter, der sie nach dem Ende des Mietverhältnisses zurückzahlt."),
            ("fra", "Le locataire verse un dépôt de garantie de deux mois de loyer avant d'entrer dans le logement, et le propriétaire le rend à la fin du bail."),
            ("spa", "El inquilino paga una fianza de dos meses de alquiler antes de entrar en el piso, y el propietario la devuelve al terminar el contrato."),
            ("rus", "Арендатор вносит залог в размере двухмесячной арендной платы до въезда в квартиру."),
            ("jpn", "借主は入居前に家賃二か月分の敷金を貸主に支払います。"),
            ("cmn", "租客在入住前向房东支付两个月房租作为押金。"),
        ];
        for (code, text) in cases {
            assert_eq!(detect(text).language, Some(code), "{text}");
        }
        assert_eq!(detect("42"), Detected::default());
        assert_eq!(detect("квартира").script, Some(Script::Cyrillic));
    }

    #[test]
    fn an_english_model_counts_in_english_alone_and_a_multilingual_one_everywhere() {
        let weight = |model: &str, text: &str| {
            let d = detect(text);
            dense_weight(model, d.language, d.script.map(|s| s.name().to_string()).as_deref())
        };
        let minilm = "all-MiniLM-L6-v2";
        let english = "Employees get twenty-five days of paid annual leave each year, taken in agreement with their manager.";
        let german = "Die Mitarbeiter erhalten jedes Jahr fünfundzwanzig Tage bezahlten Urlaub, den sie mit ihrem Vorgesetzten abstimmen.";
        let russian = "Сотрудники получают двадцать пять дней оплачиваемого отпуска в год.";
        let japanese = "従業員は毎年二十五日の有給休暇を取得できます。";
        assert_eq!(weight(minilm, english), 1.0);
        assert_eq!(weight(minilm, german), 0.0);
        assert_eq!(weight(minilm, russian), 0.0);
        assert_eq!(weight(minilm, japanese), 0.0);
        assert_eq!(weight(minilm, "2,900"), 1.0, "nothing to tell by: the model's own");
        assert_eq!(weight("multilingual-e5-small", russian), 1.0);
        assert_eq!(weight("multilingual-e5-small", japanese), 1.0);
        // Queries: an English one counts; one told as another language does not; a short one as
        // much as the index is English.
        assert_eq!(query_weight(minilm, "the tenant pays a security deposit of two months' rent before moving in", 0.1), 1.0);
        assert_eq!(query_weight(minilm, "copy files and directories", 0.9), 0.9, "too short to tell: as English as the index");
        assert_eq!(query_weight(minilm, "Dateien und Verzeichnisse kopieren", 0.9), 0.0);
        assert_eq!(query_weight(minilm, "open and possibly create a file", 0.9), 0.9);
        assert_eq!(query_weight(minilm, "wie viele Urlaubstage", 0.05), 0.0, "over a mostly German index");
        assert_eq!(query_weight(minilm, "2,900", 0.0), 1.0);
        assert_eq!(query_weight(minilm, "сколько стоит аренда", 1.0), 0.0);
        assert_eq!(query_weight(minilm, "家賃はいくらですか", 1.0), 0.0);
        assert_eq!(query_weight("multilingual-e5-small", "家賃はいくらですか", 0.0), 1.0);
    }
}
