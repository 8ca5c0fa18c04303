"""Write data/politeness.jsonl: customer-support replies labelled polite or not, written by hand.

Each scenario is a customer's message and two replies from a support agent: one polite, one not,
in a named style (sarcasm and passive aggression are the hard ones; a polite refusal is polite).
The label is about politeness only, never about whether the reply helps. Deterministic and offline:
``python data/make_politeness.py`` rewrites the file byte for byte and prints a summary.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

OUT = Path(__file__).with_name("politeness.jsonl")

# (customer message, (polite style, polite reply, note), (impolite style, impolite reply, note))
SCENARIOS: list[tuple[str, tuple[str, str, str], tuple[str, str, str]]] = [
    ("My parcel was due on Monday and it still hasn't arrived.",
     ("warm", "I'm sorry it's late. I've checked and it is at your local depot; it should reach you tomorrow.",
      "apologises and explains"),
     ("curt", "Tracking is on the website.", "dismissive, no greeting or help")),
    ("Can I change the delivery address on my order?",
     ("warm", "Of course! Just reply with the new address and I'll update it for you right away.", "friendly"),
     ("blaming", "You should have entered the right address in the first place.", "blames the customer")),
    ("I was charged twice for the same order.",
     ("formal", "Please accept our apologies for the duplicate charge. A refund has been issued and will appear "
      "within five working days.", "formal and apologetic"),
     ("sarcastic", "Wow, twice? Lucky us. I guess I'll fix it, then.", "sarcastic")),
    ("How do I reset my password?",
     ("brief-polite", "Thanks for asking! Click 'Forgot password' on the sign-in page and follow the email.",
      "short but kind"),
     ("passive-aggressive", "As it says very clearly on the sign-in page, click 'Forgot password'.",
      "implies the customer did not read")),
    ("The jacket I ordered is too small. Can I return it?",
     ("warm", "Absolutely, returns are free within 30 days. I've emailed you a prepaid label.", "helpful, warm"),
     ("rude", "Maybe order the right size next time.", "mocks the customer")),
    ("Your app keeps crashing when I open my basket.",
     ("warm", "Sorry about that, and thank you for telling us. Could you tell me which phone you use so I can "
      "look into it?", "thanks the customer"),
     ("shouting", "WE HAVE NO OTHER REPORTS OF THIS. UPDATE YOUR PHONE.", "all caps, dismissive")),
    ("Do you ship to Norway?",
     ("polite-refusal", "I'm sorry, we don't ship to Norway at the moment. I hope we can in the future.",
      "declines politely")),
    ("I'd like to cancel my subscription.",
     ("formal", "Certainly. Your subscription has been cancelled and you will not be charged again. Thank you "
      "for having been with us.", "courteous"),
     ("passive-aggressive", "Fine. Cancelled. Hope whatever you're switching to is worth it.", "resentful")),
    ("Is the blue kettle back in stock?",
     ("brief-polite", "Not yet, sorry! I can email you the moment it is, if you like.", "kind offer"),
     ("curt", "No.", "one-word brush-off")),
    ("I've been on hold for forty minutes.",
     ("warm", "I'm really sorry for the wait, that's far too long. I'm here now, how can I help?",
      "acknowledges the wait"),
     ("blaming", "Everyone calls on Mondays. You could have called another day.", "blames the customer")),
    ("The instructions for the shelf are missing a page.",
     ("warm", "Thanks for letting us know! I've attached the full instructions as a PDF.", "grateful and helpful"),
     ("sarcastic", "Shocking, a missing page. I'm sure you'll manage without it.", "sarcastic")),
    ("Can I pay by bank transfer?",
     ("polite-refusal", "I'm afraid we only accept cards and PayPal, sorry for the inconvenience.",
      "apologetic refusal"),
     ("curt", "Cards only. Read the FAQ.", "terse, tells the customer to read")),
    ("My discount code isn't working.",
     ("warm", "Sorry about that! That code expired yesterday, but I've applied the discount to your order "
      "anyway.", "generous and kind"),
     ("rude", "Codes expire. That's kind of the point.", "condescending")),
    ("Why is my account locked?",
     ("formal", "Your account was locked after several failed sign-in attempts, for your security. I have "
      "unlocked it; please let us know if you need anything else.", "courteous explanation"),
     ("shouting", "TOO MANY WRONG PASSWORDS. IT'S UNLOCKED NOW.", "shouting")),
    ("The food arrived cold.",
     ("warm", "I'm so sorry your meal arrived cold. I've refunded the order and added a voucher for next time.",
      "apologetic"),
     ("passive-aggressive", "It was hot when it left us, so I'm not sure what you expect us to do.",
      "deflects with an edge")),
    ("Can you tell me when the shop opens on Sunday?",
     ("brief-polite", "Good morning! We open at 10am on Sundays. Have a lovely day.", "friendly greeting"),
     ("curt", "10.", "curt")),
    ("I think I was sent the wrong colour.",
     ("warm", "Oh no, sorry about the mix-up! I'll send the right colour today; keep the other one.",
      "warm and generous"),
     ("blaming", "You probably clicked the wrong colour when ordering.", "blames the customer")),
    ("Could you help me choose between the two laptops?",
     ("warm", "I'd be glad to help! What will you mostly use it for?", "eager to help"),
     ("sarcastic", "Sure, because I've got nothing better to do today.", "sarcastic")),
    ("I never received a receipt for my purchase.",
     ("formal", "Apologies for the oversight. I have resent the receipt to your registered email address.",
      "formal apology"),
     ("rude", "Check your spam folder like everyone else.", "condescending")),
    ("Can I get a refund on a sale item?",
     ("polite-refusal", "Unfortunately sale items can't be refunded, but I'd be happy to exchange it for you.",
      "declines kindly with an alternative"),
     ("shouting", "NO REFUNDS ON SALE ITEMS. IT SAYS SO EVERYWHERE.", "shouting")),
    ("The website says my order is delivered but it isn't here.",
     ("warm", "That's worrying, I'm sorry. I've opened a claim with the courier and will update you within a "
      "day.", "empathetic"),
     ("passive-aggressive", "Have you actually looked around your building? Parcels don't just vanish.",
      "doubts the customer")),
    ("I'd like to speak to a manager.",
     ("formal", "Of course. I have asked my manager to call you this afternoon. Is 3pm convenient?", "courteous"),
     ("curt", "Managers are busy.", "dismissive")),
    ("My gift card balance shows zero.",
     ("warm", "Sorry for the worry! The balance was moved to your new card; I've emailed you the details.",
      "reassuring"),
     ("sarcastic", "Maybe you spent it? Just a wild guess.", "sarcastic")),
    ("Is this product suitable for vegans?",
     ("brief-polite", "Great question, thank you! Yes, it is fully vegan.", "thanks the customer"),
     ("rude", "Read the label. It's not hard.", "insulting")),
    ("The size guide seems wrong.",
     ("warm", "Thank you for pointing that out! You're right, and I've asked the team to correct it.",
      "grateful"),
     ("blaming", "The size guide is fine. Maybe measure yourself properly.", "blames the customer")),
    ("I was promised a call back yesterday and nobody called.",
     ("warm", "I'm very sorry we didn't call as promised. I'm calling you myself at 11 today.", "takes ownership"),
     ("passive-aggressive", "Well, we're calling now, aren't we?", "snide")),
    ("Can I collect my order from the store instead?",
     ("brief-polite", "Yes, happily! I've switched it to store pick-up. See you soon.", "cheerful"),
     ("curt", "Whatever. Changed.", "indifferent")),
    ("The headphones stopped working after a week.",
     ("formal", "We regret the inconvenience. A replacement pair has been dispatched under warranty.",
      "formal"),
     ("shouting", "DID YOU DROP THEM? SEND THEM BACK AND WE'LL SEE.", "shouting and accusing")),
    ("Do you have this sofa in grey?",
     ("polite-refusal", "Sorry, it only comes in blue and green, but I'm happy to send you fabric samples.",
      "apologetic with an offer"),
     ("sarcastic", "Grey? How original. No, we don't.", "sarcastic")),
    ("My invoice has the wrong company name.",
     ("warm", "Thanks for spotting that! Here is a corrected invoice, sorry for the trouble.", "warm"),
     ("rude", "You typed it. Not our problem.", "rude")),
    ("How long does shipping to Canada take?",
     ("brief-polite", "Usually 7 to 10 days. Thanks for shopping with us!", "polite"),
     ("passive-aggressive", "It takes as long as it takes, like it says on the shipping page.", "snippy")),
    ("Can you remove my card details from your system?",
     ("formal", "Certainly. Your card details have been deleted. Thank you for letting us know.", "courteous"),
     ("curt", "Do it yourself in settings.", "dismissive")),
    ("I'm not happy with the quality of the paint.",
     ("warm", "I'm sorry to hear that. Could you send a photo? I'll arrange a refund or a replacement, whichever "
      "you prefer.", "empathetic"),
     ("blaming", "Sounds like you didn't prepare the wall first.", "blames the customer")),
    ("Can I add something to an order I placed an hour ago?",
     ("polite-refusal", "I'm afraid it has already been packed, sorry! I can give you free shipping on a "
      "second order.", "declines with a kind offer"),
     ("rude", "Too late. Should have thought of it before.", "scolding")),
    ("Is there a student discount?",
     ("brief-polite", "There is! Verify your student email and you'll get 10% off. Enjoy!", "friendly"),
     ("sarcastic", "Of course, because everything should be cheaper for students.", "sarcastic")),
    ("The battery life is much shorter than advertised.",
     ("warm", "Thank you for telling us, that's not what we want for you. Let's run a quick check together.",
      "supportive"),
     ("shouting", "THE ADVERTISED FIGURE IS UNDER IDEAL CONDITIONS. READ THE SMALL PRINT.", "shouting")),
    ("I accidentally ordered two of the same item.",
     ("warm", "No problem at all! I've cancelled the second one and refunded you.", "reassuring"),
     ("passive-aggressive", "Happens to people who don't check their basket, I suppose. Cancelled.", "snide")),
    ("Why was my review removed?",
     ("formal", "We apologise for any confusion. Reviews containing phone numbers are removed automatically; "
      "you are welcome to post it again without the number.", "courteous explanation"),
     ("curt", "Broke the rules.", "curt")),
    ("Do you offer gift wrapping?",
     ("brief-polite", "We do, for two pounds! Just tick the box at checkout. Thank you!", "polite"),
     ("rude", "Wrap it yourself, it's paper and tape.", "rude")),
    ("My child's toy broke on the first day.",
     ("warm", "Oh dear, I'm sorry, that's disappointing on the first day. A new one is on its way, free of "
      "charge.", "kind"),
     ("blaming", "Toys break when kids are rough with them.", "blames the child")),
    ("Can I book an appointment for Saturday?",
     ("polite-refusal", "Sorry, Saturday is fully booked. Would Sunday morning suit you?", "offers an alternative"),
     ("curt", "Full.", "curt")),
    ("You sent me someone else's order.",
     ("formal", "Please accept our sincere apologies. A courier will collect it tomorrow and your order has "
      "been sent by express delivery.", "formal apology"),
     ("sarcastic", "Congratulations, you got a surprise gift. We'll sort it out eventually.", "sarcastic")),
    ("How do I unsubscribe from your emails?",
     ("brief-polite", "Sorry for the clutter! There's an unsubscribe link at the bottom of each email.",
      "friendly"),
     ("passive-aggressive", "There's a link at the bottom. Has been there all along.", "snide")),
    ("The delivery driver was rude to me.",
     ("warm", "I'm really sorry you were treated that way. I've reported it, and thank you for telling us.",
      "empathetic"),
     ("rude", "Drivers are busy. Don't take it personally.", "dismisses the complaint")),
    ("Is my data shared with third parties?",
     ("formal", "Thank you for your question. We do not sell your data; our privacy policy lists the partners "
      "who process orders for us.", "courteous"),
     ("shouting", "READ THE PRIVACY POLICY.", "shouting")),
    ("The chair arrived with a scratch.",
     ("warm", "So sorry about the scratch! Would you like a replacement, or a partial refund if you'd rather "
      "keep it?", "apologetic and offers a choice"),
     ("curt", "It's a small scratch. Keep it.", "dismissive")),
    ("Can you explain this fee on my bill?",
     ("brief-polite", "Of course! That's the monthly service fee; happy to walk you through it.", "friendly"),
     ("sarcastic", "It's called a fee. You pay it. That's how fees work.", "sarcastic")),
    ("I've sent three emails and had no answer.",
     ("warm", "I'm truly sorry you've had to chase us. I've read all three and I'm on it now.", "apologetic"),
     ("passive-aggressive", "We answer emails in order. Sending three doesn't make it faster.", "lectures")),
]


def rows() -> list[dict[str, str]]:
    out = []
    for scenario in SCENARIOS:
        prompt, *replies = scenario
        for style, text, note in replies:
            polite = style in ("warm", "formal", "brief-polite", "polite-refusal")
            out.append({"prompt": prompt, "candidate": text, "human": "yes" if polite else "no",
                        "notes": note, "style": style})
    random.Random(26).shuffle(out)  # the two replies to one message are not neighbours
    for i, row in enumerate(out, 1):
        row["id"] = f"pol-{i:03d}"
    return [{k: r[k] for k in ("id", "prompt", "candidate", "human", "notes", "style")} for r in out]


def main() -> None:
    data = rows()
    assert len({r["id"] for r in data}) == len(data)
    assert len({(r["prompt"], r["candidate"]) for r in data}) == len(data)
    with OUT.open("w", encoding="utf-8", newline="\n") as f:
        for r in data:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    labels = Counter(r["human"] for r in data)
    styles = Counter((r["style"], r["human"]) for r in data)
    print(f"{OUT.name}: {len(data)} rows, {len(SCENARIOS)} customer messages, human: {dict(labels)}")
    for (style, human), n in sorted(styles.items()):
        print(f"  {style:20s} {human:3s} {n}")


if __name__ == "__main__":
    main()
