() => {
  const text = (document.body ? document.body.innerText : "").slice(0, 30000).toLowerCase();
  const has = (sel) => { try { return !!document.querySelector(sel); } catch (e) { return false; } };
  // A captcha is a challenge a person can see: a rendered widget or challenge frame, on
  // screen. An invisible reCAPTCHA (its badge, size=invisible frames, a button carrying the
  // site key) or an invisible hCaptcha is not one: it never asks anything of the owner.
  const shown = (el) => {
    try {
      const st = getComputedStyle(el);
      if (st.display === "none" || st.visibility === "hidden" || Number(st.opacity) < 0.1) return false;
      const r = el.getBoundingClientRect();
      return r.width >= 20 && r.height >= 20 && r.right > 0 && r.bottom > 0;
    } catch (e) { return false; }
  };
  const invisibleKind = (el) => {
    const src = String(el.getAttribute("src") || "");
    if (/[?&#]size=invisible/i.test(src)) return true;
    if (el.closest('.grecaptcha-badge, [data-size="invisible" i]')) return true;
    const tag = el.tagName;
    return el.hasAttribute("data-sitekey") && (tag === "BUTTON" || tag === "INPUT" || tag === "A");
  };
  const challenge = () => {
    let els;
    try {
      els = document.querySelectorAll('iframe[src*="recaptcha"], iframe[title="reCAPTCHA" i], .g-recaptcha, iframe[src*="hcaptcha.com"], .h-captcha, iframe[src*="challenges.cloudflare.com"], .cf-turnstile, iframe[src*="arkoselabs"], .geetest_holder, [data-sitekey]');
    } catch (e) { return false; }
    for (const el of Array.from(els).slice(0, 200)) if (!invisibleKind(el) && shown(el)) return true;
    return false;
  };
  return {
    url: location.href,
    title: (document.title || "").slice(0, 200),
    scriptBlocked: typeof window.__pabGuardTake === "function" ? window.__pabGuardTake() : 0,
    leaked: typeof window.__pabGuardTakeLeaks === "function" ? window.__pabGuardTakeLeaks() : 0,
    captcha: challenge()
      || /i'?m not a robot|confirm (that )?you('?re| are) not a robot|verify (that )?you('?re| are) (a )?human|ich bin kein roboter|je ne suis pas un robot|no soy un robot|não sou um robô|non sono un robot|ik ben geen robot|ロボットではありません|我不是机器人|人机验证/.test(text),
    login: has('input[type=password]'),
    duplicate: /you('ve| have) already applied|already applied (for|to) this|application (already exists|has already been (submitted|received))|duplicate application|bereits beworben|déjà postulé|ya (te has|se ha) postulado|já se candidatou|già candidato|al gesolliciteerd|既に応募|すでに応募|已申请过|您已申请/.test(text),
    antiBot: /unusual traffic|access (is )?denied|request (has been )?blocked|bot detected|checking (if the site connection is secure|your browser)|are you a robot|zugriff verweigert|accès refusé|acceso denegado/.test(text),
    confirmed: /thank you for (your )?appl|application (has been |was )?(received|submitted)|we('ve| have) received your application|successfully (applied|submitted)|vielen dank für ihre bewerbung|bewerbung (wurde )?(erfolgreich )?(eingegangen|übermittelt|gesendet)|merci pour votre candidature|candidature (a bien été )?(envoyée|reçue)|gracias por (tu|su) (solicitud|postulación|candidatura)|obrigad[oa] pela (sua )?candidatura|grazie per (la tua|la sua) candidatura|bedankt voor je sollicitatie|応募(が|を)?(完了|受け付け)|ご応募ありがとうございます|申请已提交|感谢您的申请|提交成功/.test(text),
  };
}
