package guard

import (
	"net"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pab-dev/pab/guard/netpolicy"
)

// Action classes of seed 000's contract: every call is one of them.
const (
	ClassRead   = "read"
	ClassFill   = "fill"
	ClassReview = "review"
	ClassSubmit = "submit"
)

// Normalize is the text form every comparison uses: Unicode NFKC, case folded, typographic
// quotes and dashes made ASCII, every run of white space (and control characters) one space,
// trimmed. Invalid UTF-8 bytes become U+FFFD. It is netpolicy.Fold, the one home of the
// folding, so that the page's requests are checked in the same form the fills are.
func Normalize(s string) string { return netpolicy.Fold(s) }

// isWordRune: letters, digits and combining marks are word characters.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

// isCJK: scripts written without spaces between words; a phrase boundary is not required there.
func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) || r == 'ー'
}

// joined reports whether a and b would be one word if adjacent: both word characters and
// neither from a script written without spaces.
func joined(a, b rune) bool {
	return isWordRune(a) && isWordRune(b) && !isCJK(a) && !isCJK(b)
}

// containsPhrase reports whether needle occurs in hay as a whole phrase: not inside a longer
// word ("no" is not found in "notice"; Unicode letters, digits and marks are word characters;
// Chinese, Japanese and Korean characters need no boundary). Both are compared as given: pass
// Normalize'd text. An empty needle is never found.
func containsPhrase(hay, needle string) bool {
	if needle == "" {
		return false
	}
	first, _ := firstRune(needle)
	last, _ := lastRune(needle)
	for from := 0; from <= len(hay)-len(needle); {
		i := strings.Index(hay[from:], needle)
		if i < 0 {
			return false
		}
		i += from
		before, okb := lastRune(hay[:i])
		after, oka := firstRune(hay[i+len(needle):])
		if (!okb || !joined(before, first)) && (!oka || !joined(last, after)) {
			return true
		}
		from = i + runeLen(hay[i:])
	}
	return false
}

func runeLen(s string) int {
	_, n := utf8.DecodeRuneInString(s)
	return max(n, 1)
}

func firstRune(s string) (rune, bool) {
	for _, r := range s {
		return r, true
	}
	return 0, false
}

func lastRune(s string) (rune, bool) {
	if s == "" {
		return 0, false
	}
	rs := []rune(s[max(0, len(s)-4):])
	return rs[len(rs)-1], true
}

// Kinds of grounding source (GroundingSource.Kind), as field.filled events name them in
// the trace (detail "source").
const (
	SourceProfile     = "profile"      // grounding.profile or profile_file
	SourceAnswer      = "answer"       // one of grounding.answers (its question and answer, or the answer)
	SourceMaterial    = "material"     // one of grounding.materials or material_files
	SourceOwnerAnswer = "owner_answer" // an answer the owner gave at a pause (POST /resume)
)

// GroundingSource is one text a source_quote may come from, and its kind (SourceProfile,
// SourceAnswer, SourceMaterial or SourceOwnerAnswer).
type GroundingSource struct {
	Kind string
	Text string
}

// CommitPhrase is one entry of the commit-label table. Strong phrases commit wherever they
// occur in a control's name (as a whole phrase); weak phrases commit only when they are the
// whole name and the control belongs to a form (an "Apply" button on a job listing opens the
// form; the same word on the form's last button sends it).
type CommitPhrase struct {
	Lang   string // en, de, fr, es, pt, it, nl, ja, zh
	Phrase string // normalized (lower case, NFKC)
	Strong bool
}

// commitPhrases is the table of labels that commit an application, in nine languages.
var commitPhrases = []CommitPhrase{
	// English
	{"en", "submit", true}, {"en", "submit application", true}, {"en", "submit my application", true},
	{"en", "send application", true}, {"en", "send my application", true}, {"en", "send your application", true},
	{"en", "complete application", true}, {"en", "complete my application", true}, {"en", "finish application", true},
	{"en", "confirm and send", true}, {"en", "apply", false}, {"en", "apply now", false}, {"en", "send", false},
	{"en", "finish", false}, {"en", "complete", false}, {"en", "done", false}, {"en", "confirm", false},
	// German
	{"de", "absenden", true}, {"de", "abschicken", true}, {"de", "einreichen", true}, {"de", "bewerbung senden", true},
	{"de", "bewerbung absenden", true}, {"de", "bewerbung abschicken", true}, {"de", "bewerbung einreichen", true},
	{"de", "jetzt absenden", true}, {"de", "bewerben", false}, {"de", "jetzt bewerben", false}, {"de", "senden", false},
	{"de", "abschliessen", false}, {"de", "fertig", false},
	// French
	{"fr", "soumettre", true}, {"fr", "soumettre ma candidature", true}, {"fr", "envoyer ma candidature", true},
	{"fr", "envoyer la candidature", true}, {"fr", "envoyer votre candidature", true}, {"fr", "valider ma candidature", true},
	{"fr", "envoyer", false}, {"fr", "postuler", false}, {"fr", "valider", false}, {"fr", "terminer", false},
	// Spanish
	{"es", "enviar solicitud", true}, {"es", "enviar candidatura", true}, {"es", "enviar mi solicitud", true},
	{"es", "enviar mi candidatura", true}, {"es", "enviar postulación", true},
	{"es", "enviar", false}, {"es", "postularse", false}, {"es", "postular", false}, {"es", "postularme", false},
	{"es", "solicitar", false}, {"es", "aplicar", false}, {"es", "finalizar", false},
	// Portuguese
	{"pt", "submeter", true}, {"pt", "submeter candidatura", true}, {"pt", "enviar inscrição", true},
	{"pt", "enviar minha candidatura", true}, {"pt", "candidatar-se", false}, {"pt", "candidatar", false},
	{"pt", "candidatar-me", false}, {"pt", "concluir", false},
	// Italian
	{"it", "invia candidatura", true}, {"it", "invia la candidatura", true}, {"it", "inviare la candidatura", true},
	{"it", "invia la mia candidatura", true}, {"it", "invia", false}, {"it", "inviare", false},
	{"it", "candidati", false}, {"it", "candidati ora", false}, {"it", "candidatati", false}, {"it", "conferma", false},
	// Dutch
	{"nl", "sollicitatie versturen", true}, {"nl", "sollicitatie verzenden", true}, {"nl", "verstuur sollicitatie", true},
	{"nl", "verzend sollicitatie", true}, {"nl", "indienen", true}, {"nl", "verzenden", false}, {"nl", "versturen", false},
	{"nl", "verstuur", false}, {"nl", "verzend", false}, {"nl", "solliciteren", false}, {"nl", "solliciteer", false},
	{"nl", "solliciteer nu", false},
	// Japanese
	{"ja", "送信", true}, {"ja", "送信する", true}, {"ja", "提出", true}, {"ja", "提出する", true},
	{"ja", "応募する", true}, {"ja", "応募を送信", true}, {"ja", "応募を完了", true}, {"ja", "応募", false},
	{"ja", "完了", false}, {"ja", "確定", false},
	// Chinese
	{"zh", "提交", true}, {"zh", "提交申请", true}, {"zh", "投递简历", true}, {"zh", "发送申请", true},
	{"zh", "確認提交", true}, {"zh", "申请", false}, {"zh", "立即申请", false}, {"zh", "投递", false},
	{"zh", "发送", false}, {"zh", "送出", true},
}

// stepPhrases are form-step and file-chooser buttons, matched at the start of a name: read
// or fill, never submit unless the DOM probe says the control submits a POST form.
var stepPhrases = []string{
	// en
	"next", "continue", "back", "previous", "add", "add another", "upload", "attach", "browse",
	"choose file", "choose a file", "select file", "select a file", "remove", "delete", "edit",
	"expand", "collapse", "show more", "save and continue", "locate me",
	// de
	"weiter", "zurück", "hinzufügen", "hochladen", "datei auswählen", "durchsuchen", "entfernen",
	"löschen", "bearbeiten", "fortfahren",
	// fr
	"suivant", "continuer", "précédent", "retour", "ajouter", "télécharger", "téléverser",
	"joindre", "parcourir", "choisir un fichier", "supprimer", "modifier",
	// es
	"siguiente", "continuar", "anterior", "atrás", "volver", "añadir", "agregar", "subir",
	"adjuntar", "examinar", "eliminar", "editar", "seleccionar archivo",
	// pt
	"próximo", "seguinte", "avançar", "voltar", "adicionar", "carregar", "anexar",
	"escolher arquivo", "escolher ficheiro", "remover", "excluir",
	// it
	"avanti", "successivo", "continua", "indietro", "precedente", "aggiungi", "carica",
	"allega", "sfoglia", "scegli file", "rimuovi", "elimina", "modifica",
	// nl
	"volgende", "doorgaan", "verder", "vorige", "terug", "toevoegen", "uploaden", "bijvoegen",
	"bladeren", "bestand kiezen", "verwijderen", "bewerken", "wijzigen",
	// ja
	"次へ", "次に進む", "次", "戻る", "前へ", "追加", "アップロード", "ファイルを選択", "削除",
	"編集", "続ける", "続行",
	// zh
	"下一步", "上一步", "继续", "繼續", "返回", "添加", "上传", "選擇檔案", "选择文件", "删除", "编辑",
}

// consentStems mark a tick that is a legal or privacy agreement (the owner's call): matched at
// the start of a word (Latin scripts) or anywhere (Chinese, Japanese).
var consentStems = []string{
	// en
	"agree", "consent", "terms", "privacy", "acknowledg", "certif", "accept", "declar", "gdpr",
	"attest", "authoriz", "authoris",
	// de
	"zustimm", "stimme", "einverstanden", "einwillig", "datenschutz", "akzeptier", "bestätige",
	"nutzungsbedingung", "agb", "dsgvo", "versichere", "erkläre",
	// fr
	"j'accepte", "consens", "conditions", "confidentialité", "certifie", "déclare", "rgpd",
	"données personnelles", "autorise",
	// es
	"acepto", "consiento", "términos", "privacidad", "condiciones", "certifico", "declaro",
	"autorizo", "protección de datos",
	// pt
	"aceito", "concordo", "consinto", "termos", "privacidade", "lgpd", "autorizo",
	// it
	"accetto", "acconsento", "termini", "informativa", "dichiaro", "autorizzo", "condizioni",
	// nl
	"akkoord", "toestemming", "voorwaarden", "verklaar", "avg", "ga ermee akkoord",
	// ja
	"同意", "規約", "プライバシー", "個人情報", "承諾",
	// zh
	"同意", "条款", "條款", "隐私", "隱私", "个人信息", "個人資料", "声明", "聲明",
}

// credentialStems mark a sign-in field: never an application answer (pauses login_required).
var credentialStems = []string{
	"password", "passcode", "passphrase", "one-time", "one time", "onetime", "otp",
	"verification code", "security code", "2fa", "two-factor", "two factor", "mfa",
	"authentication code", "passwort", "kennwort", "bestätigungscode", "sicherheitscode",
	"mot de passe", "code de vérification", "contraseña", "código de verificación", "senha",
	"código de verificação", "codice di verifica", "wachtwoord", "verificatiecode",
	"パスワード", "暗証番号", "認証コード", "確認コード", "密码", "密碼", "验证码", "驗證碼",
}

// paginationNames are names of buttons that page through results (read).
var paginationNames = []string{"more", "load more", "show more", "see more", "view more",
	"next page", "previous page", "›", "»", "‹", "«", "mehr laden", "plus", "voir plus",
	"ver más", "ver mais", "mostra altro", "meer laden", "もっと見る", "加载更多"}

// labelCore is a name reduced for whole-label comparison: normalized, without required-field
// stars, arrows and trailing punctuation.
func labelCore(name string) string {
	n := Normalize(name)
	n = strings.TrimFunc(n, func(r rune) bool {
		return r == '*' || r == '→' || r == '>' || r == '»' || r == '›' || r == '!' || r == '.' ||
			r == ':' || r == '…' || r == '-' || unicode.IsSpace(r) || unicode.Is(unicode.So, r)
	})
	return n
}

// isCommitLabel reports whether a control's name commits the application: a strong phrase
// anywhere in it, or a weak phrase as the whole name of a control that belongs to a form.
func isCommitLabel(name string, inForm bool) bool {
	n := Normalize(name)
	if n == "" {
		return false
	}
	core := labelCore(name)
	for _, p := range commitPhrases {
		if p.Strong && containsPhrase(n, p.Phrase) {
			return true
		}
		if !p.Strong && inForm && core == p.Phrase {
			return true
		}
	}
	return false
}

// hasPrefixPhrase: n starts with phrase, followed by a non-word character or the end.
func hasPrefixPhrase(n, phrase string) bool {
	if !strings.HasPrefix(n, phrase) {
		return false
	}
	last, _ := lastRune(phrase)
	after, ok := firstRune(n[len(phrase):])
	return !ok || !joined(last, after)
}

// isStepLabel reports whether a name is a form-step or file-chooser button (Next, Weiter,
// 次へ, Upload, Add ...): it starts with one of stepPhrases.
func isStepLabel(name string) bool {
	n := labelCore(name)
	for _, p := range stepPhrases {
		if hasPrefixPhrase(n, p) {
			return true
		}
	}
	return false
}

// isPaginationLabel reports whether a button name pages through results (a page number,
// arrows, "Load more"...).
func isPaginationLabel(name string) bool {
	n := Normalize(name)
	if n == "" {
		return false
	}
	if strings.HasPrefix(n, "page ") {
		n = strings.TrimPrefix(n, "page ")
	}
	digits := true
	for _, r := range n {
		if !unicode.IsDigit(r) {
			digits = false
			break
		}
	}
	if digits && len(n) <= 4 {
		return true
	}
	for _, p := range paginationNames {
		if n == p {
			return true
		}
	}
	return false
}

// stemIn: a stem found at the start of a word (or anywhere for CJK stems).
func stemIn(n, stem string) bool {
	for from := 0; from < len(n); {
		i := strings.Index(n[from:], stem)
		if i < 0 {
			return false
		}
		i += from
		first, _ := firstRune(stem)
		before, ok := lastRune(n[:i])
		if !ok || !joined(before, first) {
			return true
		}
		from = i + 1
	}
	return false
}

func anyStem(name string, stems []string) bool {
	n := Normalize(name)
	for _, s := range stems {
		if stemIn(n, s) {
			return true
		}
	}
	return false
}

// isConsentLabel reports whether a checkbox or switch name is an agreement (terms, privacy,
// consent, certify ... in the nine languages): the owner ticks it, not the agent.
func isConsentLabel(name string) bool { return anyStem(name, consentStems) }

// isCredentialLabel reports whether a field name asks for a password or a one-time code.
func isCredentialLabel(name string) bool { return anyStem(name, credentialStems) }

// safeKeys move between fields without typing, activating or submitting anything.
var safeKeys = []string{"Tab", "Shift+Tab", "ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight",
	"Escape", "Home", "End", "PageUp", "PageDown"}

// isSafeKey reports whether key (exact Playwright key name) is one of safeKeys.
func isSafeKey(key string) bool {
	for _, k := range safeKeys {
		if key == k {
			return true
		}
	}
	return false
}

// checkURL parses a URL the agent asked for (or a page landed on). Only absolute http and
// https URLs with a host are accepted; data:, blob:, javascript:, file: and every other scheme
// are refused. It returns the URL and its host (lower case, no port), or a refusal message.
func checkURL(raw string) (*url.URL, string, string) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, "", "A URL is required."
	}
	if len(raw) > 4096 {
		return nil, "", "The URL is longer than 4096 characters."
	}
	lower := strings.ToLower(raw)
	for _, s := range []string{"data:", "blob:", "javascript:", "file:", "vbscript:", "about:", "chrome:", "view-source:", "filesystem:"} {
		if strings.HasPrefix(lower, s) {
			return nil, "", strings.TrimSuffix(s, ":") + ": URLs are refused; only http(s) pages of this application's sites can be opened."
		}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, "", "Only absolute http(s) URLs can be opened."
	}
	if u.User != nil {
		return nil, "", "URLs with a user name or password are refused."
	}
	host := strings.ToLower(u.Hostname())
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return nil, "", "Only absolute http(s) URLs can be opened."
	}
	return u, host, ""
}

// hostAllowed reports whether host matches one of the site patterns: an exact host name, or
// "*.example.com" for any subdomain of example.com (not example.com itself). IP literals match
// only exactly.
func hostAllowed(sites []string, host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return false
	}
	for _, s := range sites {
		if strings.HasPrefix(s, "*.") {
			if net.ParseIP(host) == nil && strings.HasSuffix(host, s[1:]) && len(host) > len(s)-1 {
				return true
			}
			continue
		}
		if host == s {
			return true
		}
	}
	return false
}

// matchPath reports whether a URL path matches a manifest pattern: the same number of
// '/'-separated segments, each equal or a ":name" parameter matching one non-empty segment.
// A trailing slash is ignored.
func matchPath(pattern, path string) bool {
	trim := func(s string) []string {
		if len(s) > 1 {
			s = strings.TrimSuffix(s, "/")
		}
		return strings.Split(s, "/")
	}
	ps, xs := trim(pattern), trim(path)
	if len(ps) != len(xs) {
		return false
	}
	for i := range ps {
		if strings.HasPrefix(ps[i], ":") && len(ps[i]) > 1 {
			if xs[i] == "" {
				return false
			}
			continue
		}
		if ps[i] != xs[i] {
			return false
		}
	}
	return true
}

func init() {
	// The tables are written readably; compare them in the same normalized form as labels.
	for _, list := range [][]string{stepPhrases, consentStems, credentialStems, paginationNames} {
		for i := range list {
			list[i] = Normalize(list[i])
		}
	}
}
