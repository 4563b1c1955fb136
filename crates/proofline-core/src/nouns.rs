//! The prover's own words for a job and its parts, where proofline names them to a reader.

/// What a prover calls a job and its parts, for the words proofline shows a reader: the text
/// report's headings, the names of trace spans. cuzk's are the default (a sector, its
/// partitions); a prover of batches of segments says `Nouns::new("batch", "segment")`.
/// Metric and JSON field names do not change with them. A control character, a backslash or
/// a double quote in a word (which would break a metric's HELP line) becomes `_`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nouns {
    job: String,
    jobs: String,
    part: String,
    parts: String,
}

impl Default for Nouns {
    fn default() -> Self {
        Nouns::new("sector", "partition")
    }
}

impl Nouns {
    /// A job and a part, in the singular; their plurals are English's usual ones (`batch`
    /// → `batches`; [`Nouns::plural`] and [`Nouns::part_plural`] set others).
    pub fn new(job: impl Into<String>, part: impl Into<String>) -> Self {
        let (job, part) = (clean(job.into()), clean(part.into()));
        Nouns {
            jobs: plural(&job),
            parts: plural(&part),
            job,
            part,
        }
    }

    /// The plural of the job, where the usual one is wrong.
    pub fn plural(mut self, jobs: impl Into<String>) -> Self {
        self.jobs = clean(jobs.into());
        self
    }

    /// The plural of the part, where the usual one is wrong (`entry` → `entries`).
    pub fn part_plural(mut self, parts: impl Into<String>) -> Self {
        self.parts = clean(parts.into());
        self
    }

    /// A job (`sector`).
    pub fn job(&self) -> &str {
        &self.job
    }

    /// Jobs (`sectors`).
    pub fn jobs(&self) -> &str {
        &self.jobs
    }

    /// A part of a job (`partition`).
    pub fn part(&self) -> &str {
        &self.part
    }

    /// Parts of a job (`partitions`).
    pub fn parts(&self) -> String {
        self.parts.clone()
    }

    /// `template` in these words: `{job}`, `{jobs}`, `{part}` and `{parts}` replaced by them,
    /// and `{Job}`, `{Jobs}`, `{Part}`, `{Parts}` by them with a capital (metric HELP texts,
    /// report headings). Anything else is left as it is.
    pub fn fill(&self, template: &str) -> String {
        let mut out = String::with_capacity(template.len() + 16);
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let tail = &rest[open + 1..];
            let word = tail.find('}').and_then(|close| {
                let key = &tail[..close];
                let word = match key.to_ascii_lowercase().as_str() {
                    "job" => &self.job,
                    "jobs" => &self.jobs,
                    "part" => &self.part,
                    "parts" => &self.parts,
                    _ => return None,
                };
                Some((close, cased_as(word, key)))
            });
            match word {
                Some((close, value)) => {
                    out.push_str(&value);
                    rest = &tail[close + 1..];
                }
                None => {
                    out.push('{');
                    rest = tail;
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// `text`, written in cuzk's words, in these: the words `sector`, `sectors`,
    /// `partition` and `partitions` (and with a capital) replaced where they stand alone
    /// (`cross-sector` becomes `cross-batch`; `cross_sector`, a label value, stays). For the
    /// sentences proofline writes (a verdict, the floors); never for what a log wrote.
    pub fn rephrase<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        if *self == Nouns::default() {
            return std::borrow::Cow::Borrowed(text);
        }
        let is_word = |c: char| c.is_alphanumeric() || c == '_';
        let mut out = String::with_capacity(text.len() + 16);
        let mut rest = text;
        while !rest.is_empty() {
            let start = rest.find(is_word).unwrap_or(rest.len());
            out.push_str(&rest[..start]);
            rest = &rest[start..];
            let end = rest.find(|c: char| !is_word(c)).unwrap_or(rest.len());
            let word = &rest[..end];
            match word.to_ascii_lowercase().as_str() {
                "sector" => out.push_str(&cased_as(&self.job, word)),
                "sectors" => out.push_str(&cased_as(&self.jobs, word)),
                "partition" => out.push_str(&cased_as(&self.part, word)),
                "partitions" => out.push_str(&cased_as(&self.parts, word)),
                _ => out.push_str(word),
            }
            rest = &rest[end..];
        }
        std::borrow::Cow::Owned(out)
    }

    /// `JOB,PART` (`batch,segment`), as a command line gives them.
    pub fn parse(s: &str) -> Result<Nouns, String> {
        let (job, part) = s
            .split_once(',')
            .ok_or_else(|| format!("`{s}` is not JOB,PART (e.g. batch,segment)"))?;
        let (job, part) = (job.trim(), part.trim());
        if job.is_empty() || part.is_empty() {
            return Err(format!("`{s}`: both nouns are needed (e.g. batch,segment)"));
        }
        if let Some(c) = s.chars().find(|&c| unfit(c)) {
            return Err(format!(
                "`{}`: {c:?} cannot be in a noun (it would break the metrics' HELP lines)",
                s.escape_debug()
            ));
        }
        Ok(Nouns::new(job, part))
    }
}

/// `word`, with a capital where `like` starts with one.
fn cased_as<'a>(word: &'a str, like: &str) -> std::borrow::Cow<'a, str> {
    if like.starts_with(char::is_uppercase) {
        std::borrow::Cow::Owned(capitalized(word))
    } else {
        std::borrow::Cow::Borrowed(word)
    }
}

/// A character a HELP line cannot hold as it is.
fn unfit(c: char) -> bool {
    c.is_control() || c == '\\' || c == '"'
}

/// `word` with every character a HELP line cannot hold made `_`.
fn clean(word: String) -> String {
    if word.contains(unfit) {
        word.chars()
            .map(|c| if unfit(c) { '_' } else { c })
            .collect()
    } else {
        word
    }
}

/// English's usual plural of `noun`.
fn plural(noun: &str) -> String {
    if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|e| noun.ends_with(e))
    {
        format!("{noun}es")
    } else {
        format!("{noun}s")
    }
}

/// `s` with its first letter in capitals.
pub(crate) fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_and_parsing() {
        assert_eq!(Nouns::default().jobs(), "sectors");
        assert_eq!(Nouns::new("batch", "segment").jobs(), "batches");
        assert_eq!(
            Nouns::new("proof", "circuit").plural("proofs!").jobs(),
            "proofs!"
        );
        let n = Nouns::parse("batch, segment").unwrap();
        assert_eq!((n.job(), n.part()), ("batch", "segment"));
        assert!(Nouns::parse("batch").unwrap_err().contains("JOB,PART"));
        assert!(Nouns::parse("batch,").unwrap_err().contains("both"));
        // a HELP line cannot be broken by a noun
        assert!(
            Nouns::parse("batch\nx 1,seg")
                .unwrap_err()
                .contains("'\\n' cannot")
        );
        assert!(Nouns::parse("ba\\tch,seg").is_err());
        assert!(Nouns::parse("\"batch\",seg").is_err());
        assert_eq!(Nouns::new("a\"b", "c").job(), "a_b");
        let n = Nouns::new("batch\nfoo", "seg\\x").part_plural("entries\r");
        assert_eq!((n.job(), n.part()), ("batch_foo", "seg_x"));
        assert_eq!(n.fill("{parts} {jobs}"), "entries_ batch_foos");
        assert_eq!(
            Nouns::new("proof", "entry")
                .part_plural("entries")
                .fill("{Parts}"),
            "Entries"
        );
        assert_eq!(capitalized("batches"), "Batches");
        let n = Nouns::new("batch", "segment");
        assert_eq!(
            n.fill("{Jobs} of {parts}; a {job}'s {Part} {x} {jobs} {Parts}: {part}{"),
            "Batches of segments; a batch's Segment {x} batches Segments: segment{"
        );
        assert_eq!(
            n.rephrase("GPU floor (0.3 s per sector); Partitions waited, cross-sector, cross_sector, sectors2, 10 partitions."),
            "GPU floor (0.3 s per batch); Segments waited, cross-batch, cross_sector, sectors2, 10 segments."
        );
        assert!(matches!(
            Nouns::default().rephrase("per sector"),
            std::borrow::Cow::Borrowed("per sector")
        ));
        assert_eq!(
            Nouns::default().fill("{Job} transitions, {part} stage, cross_sector"),
            "Sector transitions, partition stage, cross_sector"
        );
    }
}
