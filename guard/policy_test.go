package guard

import "testing"

func TestGroundingRefusal(t *testing.T) {
	src := []string{"Jane Doe, jane.doe@example.com, +1 555 0100. Lives in Berlin. Notice period: 3 months.",
		"Do you need sponsorship?\nNo", "東京都渋谷区神南1-2-3", "Ｆｕｌｌ width ＡＢＣ"}
	cases := []struct {
		name, value, quote string
		ok                 bool
	}{
		{"exact", "Jane Doe", "Jane Doe, jane.doe@example.com", true},
		{"case differs (not the same bytes)", "jane doe", "JANE   doe,\n jane.doe@example.com", false},
		{"no quote", "Jane", "", false},
		{"one char quote", "J", "J", false},
		{"quote not in sources", "Jane", "Jane Smith", false},
		{"value not in quote", "Berlin", "Jane Doe", false},
		{"no inside notice", "No", "Notice period", false},
		{"no, a whole line", "No", "No", true},
		{"partial word quote refused", "Ja", "Ja", false},
		{"value inside an email", "Doe", "jane.doe@example.com", false},
		{"email", "jane.doe@example.com", "jane.doe@example.com", true},
		{"phone", "+1 555 0100", "+1 555 0100", true},
		{"part of a phone number", "555", "+1 555 0100", false},
		{"cjk substring", "渋谷区", "東京都渋谷区神南", true},
		{"nfkc copy (not the same bytes)", "full width abc", "Full width ABC", false},
		{"empty value", "  ", "Jane Doe", false},
		{"value side of a sentence", "3 months", "Notice period: 3 months", true},
		{"a label", "Notice period", "Notice period: 3 months", false},
	}
	for _, c := range cases {
		got := groundingRefusal(c.value, c.quote, src)
		if (got == "") != c.ok {
			t.Errorf("%s: groundingRefusal(%q,%q) = %q, want ok=%v", c.name, c.value, c.quote, got, c.ok)
		}
	}
}

// TestGroundValueIssue19: the cases of issue 19 that grounding by words accepted, against
// the apply-* owner's profile and answers: refused, or marked weak, as docs/guard.md says.
func TestGroundValueIssue19(t *testing.T) {
	src := []GroundingSource{
		{SourceProfile, "Jane Doe\nEmail: jane.doe@example.org\nPhone: +1 555 0100\nLocation: London, England, United Kingdom\nWork authorization: Yes\nSalary expectation: EUR 150,000"},
		{SourceAnswer, "Will you now or in the future require visa sponsorship?\nNo"},
		{SourceMaterial, "Dear hiring team, I build reliable backend systems.\nKind regards, Jane Doe"},
		{SourceMaterial, "Salary expectation: 150,000 per year\nEmail: jane@example.com"},
	}
	for _, c := range []struct {
		name, field, value, quote string
		ok, weak                  bool
		kind                      string
	}{
		{"fragment of an email", "Website", "example.org", "jane.doe@example.org", false, false, ""},
		{"text spanning two profile lines", "Name", "Jane Doe Email", "Jane Doe\nEmail: jane.doe@example.org", false, false, ""},
		{"full-width copy of the email", "Email", "ｊａｎｅ．ｄｏｅ＠ｅｘａｍｐｌｅ．ｏｒｇ", "Email: jane.doe@example.org", false, false, ""},
		{"a label word typed as an email", "Email", "Phone", "Phone: +1 555 0100", false, false, ""},
		{"the label word of its own line", "Email", "Email", "Email: jane.doe@example.org", false, false, ""},
		{"sponsorship Yes from work authorization", "Will you now or in the future require visa sponsorship?", "Yes", "Work authorization: Yes", true, true, SourceProfile},
		{"the sponsorship answer", "Will you require sponsorship for employment?", "No", "No", true, false, SourceAnswer},
		{"the email", "Email*", "jane.doe@example.org", "Email: jane.doe@example.org", true, false, SourceProfile},
		{"a whole value in part, by words", "City", "London", "Location: London, England, United Kingdom", true, true, SourceProfile},
		{"where located", "Where are you currently located?", "London, England, United Kingdom", "Location: London, England, United Kingdom", true, false, SourceProfile},
		{"first name from the name line", "First Name", "Jane", "Jane Doe", true, false, SourceProfile},
		{"part of a phone number", "Phone", "0100", "Phone: +1 555 0100", false, false, ""},
		{"part of an amount", "Salary", "150", "Salary expectation: EUR 150,000", false, false, ""},
		{"a select option's label", "Expected salary", "EUR 150,000", "Salary expectation: EUR 150,000", true, false, SourceProfile},
		{"a select option's value attribute", "Expected salary", "7", "Salary expectation: EUR 150,000", false, false, ""},
		{"a material sentence", "Cover letter", "Dear hiring team, I build reliable backend systems.", "Dear hiring team, I build reliable backend systems.", true, false, SourceMaterial},
		{"the whole material", "Cover letter", "Dear hiring team, I build reliable backend systems.\nKind regards, Jane Doe", "Dear hiring team, I build reliable backend systems.\nKind regards, Jane Doe", true, false, SourceMaterial},
		{"a quote of part, the value outside it", "Last name", "Doe", "Kind regards", false, false, ""},
		{"words across the material's lines", "Cover letter", "systems. Kind regards", "systems.\nKind regards", false, false, ""},
		// a material's labels are labels too (review: the whole material let any span of it ground)
		{"a material's label word", "Email", "Email", "Email: jane@example.com", false, false, ""},
		{"a material's key", "Salary", "Salary expectation", "Salary expectation: 150,000 per year", false, false, ""},
		{"a word of a material's key in another field", "Name", "expectation", "Salary expectation: 150,000 per year", false, false, ""},
		{"a material's keyed value", "Expected salary", "150,000 per year", "Salary expectation: 150,000 per year", true, false, SourceMaterial},
	} {
		r, refusal := GroundValue(c.value, c.quote, c.field, src)
		if (refusal == "") != c.ok || r.Weak != c.weak || r.Kind != c.kind {
			t.Errorf("%s: GroundValue(%q, %q, field %q) = %+v %q; want ok=%v weak=%v kind %q", c.name, c.value, c.quote, c.field, r, refusal, c.ok, c.weak, c.kind)
		}
	}
}

func TestCommitLabels(t *testing.T) {
	cases := []struct {
		label  string
		inForm bool
		want   bool
	}{
		{"Submit application", false, true}, {"Submit", true, true}, {"SUBMIT APPLICATION", false, true},
		{"Send application", false, true}, {"Apply", true, true}, {"Apply", false, false},
		{"Apply for this job", false, false}, {"Apply now", true, true}, {"Complete application", false, true},
		{"Bewerbung absenden", false, true}, {"Absenden", false, true}, {"Jetzt bewerben", true, true}, {"Abschicken", false, true},
		{"Einreichen", false, true}, {"Envoyer ma candidature", false, true}, {"Soumettre", false, true},
		{"Postuler", true, true}, {"Enviar solicitud", false, true}, {"Postularse", true, true},
		{"Solicitar", true, true}, {"Enviar candidatura", false, true}, {"Candidatar-se", true, true},
		{"Invia candidatura", false, true}, {"Candidati", true, true}, {"Sollicitatie versturen", false, true},
		{"Verzenden", true, true}, {"Solliciteren", true, true}, {"送信", false, true}, {"応募する", false, true},
		{"この内容で送信する", false, true}, {"提出", false, true}, {"提交", false, true}, {"提交申请", false, true},
		{"投递简历", false, true}, {"申请", true, true}, {"申请", false, false},
		{"Next", true, false}, {"Continue", true, false}, {"Weiter", true, false}, {"Suivant", true, false},
		{"Siguiente", true, false}, {"Próximo", true, false}, {"Avanti", true, false}, {"Volgende", true, false},
		{"次へ", true, false}, {"下一步", true, false}, {"Submitting guide", false, false}, {"", true, false},
		{"Submit application →", false, true}, {"Apply *", true, true},
	}
	for _, c := range cases {
		if got := isCommitLabel(c.label, c.inForm); got != c.want {
			t.Errorf("isCommitLabel(%q, inForm=%v) = %v, want %v", c.label, c.inForm, got, c.want)
		}
	}
}

func TestCommitPhrasesCoverNineLanguages(t *testing.T) {
	langs := map[string]bool{}
	for _, p := range commitPhrases {
		langs[p.Lang] = true
		if Normalize(p.Phrase) != p.Phrase {
			t.Errorf("phrase %q is not normalized", p.Phrase)
		}
		if !isCommitLabel(p.Phrase, true) {
			t.Errorf("phrase %q does not commit its own label", p.Phrase)
		}
	}
	for _, l := range []string{"en", "de", "fr", "es", "pt", "it", "nl", "ja", "zh"} {
		if !langs[l] {
			t.Errorf("no commit phrase for %s", l)
		}
	}
}

func TestStepLabels(t *testing.T) {
	for _, s := range []string{"Next", "Continue", "Back", "Add another", "Upload", "Attach", "Weiter", "Zurück",
		"Suivant", "Siguiente", "Próximo", "Avanti", "Volgende", "次へ", "下一步", "Next »", "Choose file"} {
		if !isStepLabel(s) {
			t.Errorf("isStepLabel(%q) = false", s)
		}
	}
	for _, s := range []string{"Nextel account", "Submit", "Apply", "Go", "", "Continued education"} {
		if isStepLabel(s) {
			t.Errorf("isStepLabel(%q) = true", s)
		}
	}
	for _, s := range []string{"2", "Page 3", "Load more", "»"} {
		if !isPaginationLabel(s) {
			t.Errorf("isPaginationLabel(%q) = false", s)
		}
	}
	if isPaginationLabel("Submit") || isPaginationLabel("12345") {
		t.Error("isPaginationLabel too wide")
	}
}

func TestConsentAndCredentialLabels(t *testing.T) {
	for _, s := range []string{"I agree to the privacy policy", "I accept the Terms", "I acknowledge the notice",
		"I certify that the above is true", "GDPR consent", "Ich stimme der Datenschutzerklärung zu",
		"J'accepte les conditions", "Acepto la política de privacidad", "Concordo com os termos",
		"Accetto l'informativa", "Ik ga akkoord met de voorwaarden", "個人情報の取り扱いに同意する", "我同意隐私政策"} {
		if !isConsentLabel(s) {
			t.Errorf("isConsentLabel(%q) = false", s)
		}
	}
	for _, s := range []string{"Yes", "No", "Remote", "Python", "Disagreeable? no: Sponsorship"} {
		if isConsentLabel(s) && s != "Disagreeable? no: Sponsorship" {
			t.Errorf("isConsentLabel(%q) = true", s)
		}
	}
	for _, s := range []string{"Password", "Enter your password", "One-time code", "Verification code", "2FA code",
		"Passwort", "Mot de passe", "Contraseña", "Senha", "Wachtwoord", "パスワード", "密码", "验证码"} {
		if !isCredentialLabel(s) {
			t.Errorf("isCredentialLabel(%q) = false", s)
		}
	}
	for _, s := range []string{"First Name", "Email", "Postcode", "Phone"} {
		if isCredentialLabel(s) {
			t.Errorf("isCredentialLabel(%q) = true", s)
		}
	}
}

func TestSafeKeys(t *testing.T) {
	for _, k := range []string{"Tab", "Shift+Tab", "ArrowDown", "Escape", "PageUp", "End"} {
		if !isSafeKey(k) {
			t.Errorf("isSafeKey(%q) = false", k)
		}
	}
	for _, k := range []string{"Enter", " ", "Space", "a", "Control+Enter", "tab", "NumpadEnter", ""} {
		if isSafeKey(k) {
			t.Errorf("isSafeKey(%q) = true", k)
		}
	}
}

func TestCheckURL(t *testing.T) {
	cases := []struct {
		raw, host string
		ok        bool
	}{
		{"https://job-boards.greenhouse.io/axon/jobs/1", "job-boards.greenhouse.io", true},
		{"http://Example.COM:8080/x", "example.com", true},
		{"data:text/html,<form>", "", false}, {"DATA:text/html,x", "", false}, {"blob:https://x/1", "", false},
		{"javascript:alert(1)", "", false}, {"file:///etc/passwd", "", false}, {"ftp://x/y", "", false},
		{"/relative", "", false}, {"", "", false}, {"https://user:pw@example.com/", "", false}, {"about:blank", "", false},
	}
	for _, c := range cases {
		_, host, refusal := checkURL(c.raw)
		if (refusal == "") != c.ok || host != c.host {
			t.Errorf("checkURL(%q) = host %q refusal %q, want host %q ok=%v", c.raw, host, refusal, c.host, c.ok)
		}
	}
}

func TestHostAllowedAndMatchPath(t *testing.T) {
	sites := []string{"job-boards.greenhouse.io", "*.greenhouse.io"}
	for h, want := range map[string]bool{"job-boards.greenhouse.io": true, "boards.greenhouse.io": true,
		"greenhouse.io": false, "evilgreenhouse.io": false, "greenhouse.io.evil.com": false, "JOB-BOARDS.GREENHOUSE.IO.": true, "": false} {
		if got := hostAllowed(sites, h); got != want {
			t.Errorf("hostAllowed(%q) = %v", h, got)
		}
	}
	cases := []struct {
		pattern, path string
		want          bool
	}{
		{"/axon/jobs/:id", "/axon/jobs/123", true}, {"/axon/jobs/:id", "/axon/jobs/123/", true},
		{"/axon/jobs/:id", "/axon/jobs", false}, {"/axon/jobs/:id", "/axon/jobs/1/confirmation", false},
		{"/axon/jobs/:id/confirmation", "/axon/jobs/1/confirmation", true}, {"/", "/", true}, {"/a/:x", "/a/", false},
	}
	for _, c := range cases {
		if got := matchPath(c.pattern, c.path); got != c.want {
			t.Errorf("matchPath(%q,%q) = %v", c.pattern, c.path, got)
		}
	}
}

func TestContainsPhrase(t *testing.T) {
	if !containsPhrase("a no b", "no") || containsPhrase("notice", "no") || containsPhrase("ano", "no") || containsPhrase("x", "") {
		t.Error("containsPhrase boundaries wrong")
	}
	if !containsPhrase("notice no", "no") {
		t.Error("second occurrence not found")
	}
}
