"""Build the sample datasets in this folder from hand-written facts.

Run from the repository root (or anywhere): ``python data/make_data.py``.
Writes ``qa_calibration.jsonl`` and ``pairwise.jsonl`` next to this script and
prints a summary. The output is deterministic (fixed seeds, no network).

Every question, reference, candidate answer and label below was written by
hand for llm_connect. The only templating is the markdown wrapper
(:func:`md`) used for the markdown-formatted candidates, and the assignment
of pretend model names, which is a seeded round-robin within each style so
every model family gets a similar mix of right and wrong answers.
"""

from __future__ import annotations

import json
import random
import re
import string
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEP = " | "

# -- candidate styles ----------------------------------------------------------
# correct:    short, sentence, alias, format, verbose, long, markdown, hedged
# borderline: partial, imprecise, over-hedged (label given per row)
# wrong:      wrong-short, near-miss, wrong-verbose, wrong-long, wrong-markdown
CORRECT_STYLES = {"short", "sentence", "alias", "format", "verbose", "long", "markdown", "hedged"}
WRONG_STYLES = {"wrong-short", "near-miss", "wrong-verbose", "wrong-long", "wrong-markdown"}
BORDERLINE_STYLES = {"partial", "imprecise", "over-hedged"}

# Pretend model names. Ten slots, two of them SmolLM2 (~20%), cycled per style.
MODEL_SLOTS = [
    "gpt-4o-mini",
    "claude-3-haiku",
    "llama-3-8b-instruct",
    "smollm2-135m-instruct",
    "mistral-7b-instruct",
    "gpt-3.5-turbo",
    "gpt-4o-mini",
    "claude-3-haiku",
    "smollm2-1.7b-instruct",
    "llama-3-8b-instruct",
]

_MD_TEMPLATES = [
    "**{a}**\n\n- {p1}\n- {p2}",
    "## Answer\n\n{a}\n\n### Key facts\n\n- {p1}\n- {p2}",
    "### Short answer\n\n**{a}**\n\n1. {p1}\n2. {p2}",
]
_md_counter = 0


def md(answer: str, p1: str, p2: str) -> str:
    """Markdown-formatted answer: one of three layouts (header, bold, bullets), rotated."""
    global _md_counter
    tpl = _MD_TEMPLATES[_md_counter % len(_MD_TEMPLATES)]
    _md_counter += 1
    return tpl.format(a=answer, p1=p1, p2=p2)


@dataclass
class C:
    """One candidate answer. ``human`` defaults from the style; ``h2`` defaults to ``human``."""

    style: str
    text: str
    human: str | None = None
    h2: str | None = None


def Q(prompt: str, refs: str, *cands: C) -> tuple[str, str, tuple[C, ...]]:
    return prompt, refs, cands


# -- QA calibration set -------------------------------------------------------
# refs: acceptable reference answers joined by " | ".

QUESTIONS = [
    # ---- geography
    Q(
        "What is the capital of Australia?",
        "Canberra",
        C("sentence", "The capital of Australia is Canberra."),
        C(
            "wrong-verbose",
            "The capital of Australia is Sydney. As the country's largest and oldest city, Sydney hosts the "
            "federal government and is home to landmarks such as the Sydney Opera House and the Harbour Bridge.",
        ),
    ),
    Q(
        "What is the capital of Canada?",
        "Ottawa",
        C("near-miss", "Toronto"),
        C("sentence", "Ottawa, in the province of Ontario, is the capital of Canada."),
        C("markdown", md("Ottawa", "Located in the province of Ontario", "Seat of the Parliament of Canada")),
    ),
    Q(
        "What is the longest river in South America?",
        "Amazon | Amazon River",
        C("short", "The Amazon"),
        C("wrong-short", "The Orinoco"),
        C(
            "markdown",
            md(
                "The Amazon River",
                "Flows from the Andes in Peru to the Atlantic Ocean in Brazil",
                "The largest river in the world by volume of water discharged",
            ),
        ),
    ),
    Q(
        "What is the largest ocean on Earth?",
        "Pacific Ocean | Pacific",
        C("short", "Pacific Ocean"),
        C(
            "wrong-markdown",
            md(
                "Atlantic Ocean",
                "Covers roughly a third of Earth's surface",
                "Separates the Americas from Europe and Africa",
            ),
        ),
        C(
            "verbose",
            "The largest ocean is the Pacific Ocean, which covers about a third of Earth's surface and is larger "
            "than all of the planet's land area combined.",
        ),
    ),
    Q(
        "On which continent is Mount Kilimanjaro?",
        "Africa",
        C("markdown", md("Africa", "Located in northeastern Tanzania", "The highest mountain on the continent")),
        C("sentence", "Mount Kilimanjaro is in Africa, in northeastern Tanzania."),
        C("wrong-short", "South America"),
    ),
    Q(
        "What is the smallest country in the world by area?",
        "Vatican City | Vatican | Holy See",
        C("short", "Vatican City"),
        C(
            "wrong-long",
            "The smallest country in the world is Monaco. Covering just over two square kilometres on the French "
            "Riviera, this tiny principality is famous for its casino in Monte Carlo, its annual Formula One Grand "
            "Prix and its ruling family, the House of Grimaldi. Although some people mention Vatican City in this "
            "context, the Vatican is usually treated as a religious enclave of Rome rather than a fully independent "
            "country, so Monaco holds the record for the smallest sovereign state. Despite its size, Monaco is one "
            "of the most densely populated places on Earth and has one of the highest incomes per person in the "
            "world.",
        ),
        C("hedged", "I think it's Vatican City, though I'm not 100% certain."),
    ),
    Q(
        "What is the largest hot desert in the world?",
        "Sahara | Sahara Desert",
        C("short", "The Sahara Desert"),
        C("near-miss", "The Arabian Desert"),
        C("over-hedged", "It's either the Sahara or the Arabian Desert, or possibly the Gobi.", human="no", h2="yes"),
    ),
    Q(
        "What is the capital of Turkey?",
        "Ankara",
        C("markdown", md("Ankara", "Capital since 1923", "Located in central Anatolia")),
        C("near-miss", "Istanbul"),
        C(
            "wrong-long",
            "Turkey's capital is Istanbul. Straddling the Bosphorus strait between Europe and Asia, Istanbul has "
            "been the political and cultural centre of the region for more than fifteen centuries, first as "
            "Byzantium and then as Constantinople, the capital of the Byzantine and Ottoman empires. Today it is "
            "the country's largest city by far, with over fifteen million residents, and it remains the seat of "
            "Turkey's government and its most important economic hub. Ankara, by contrast, is a mid-sized "
            "administrative city in central Anatolia best known for its universities and the mausoleum of "
            "Atatürk.",
        ),
    ),
    Q(
        "In which country is the city of Marrakesh?",
        "Morocco",
        C("short", "Morocco"),
        C("wrong-short", "Algeria"),
    ),
    Q(
        "What is the highest mountain in the world above sea level?",
        "Mount Everest | Everest",
        C("short", "Everest"),
        C("alias", "Sagarmatha", h2="no"),
        C(
            "wrong-verbose",
            "The highest mountain in the world is K2, which rises to 8,611 metres on the border between Pakistan "
            "and China and is famous as the most dangerous of the great peaks.",
        ),
    ),
    Q(
        "What is the capital of New Zealand?",
        "Wellington",
        C("markdown", md("Wellington", "At the southern tip of the North Island", "Capital since 1865")),
        C("wrong-short", "Auckland"),
        C(
            "verbose",
            "Wellington is the capital of New Zealand. It sits at the southern tip of the North Island and has "
            "been the seat of government since 1865, when it replaced Auckland.",
        ),
    ),
    Q(
        "Which river flows through Baghdad?",
        "Tigris | Tigris River",
        C("short", "The Tigris"),
        C("near-miss", "The Euphrates"),
    ),
    Q(
        'Which US state is nicknamed the "Sunshine State"?',
        "Florida",
        C("short", "Florida"),
        C("alias", "FL", h2="no"),
        C(
            "wrong-verbose",
            "California is known as the Sunshine State thanks to its warm Mediterranean climate, long sunny "
            "summers and famous beaches stretching from San Diego to Santa Barbara.",
        ),
    ),
    Q(
        "What is the capital of Brazil?",
        "Brasília | Brasilia",
        C("sentence", "Brazil's capital is Brasília, a planned city inaugurated in 1960."),
        C(
            "wrong-long",
            "The capital of Brazil is Rio de Janeiro. Founded by the Portuguese in 1565, Rio grew into the "
            "country's political and cultural heart, and it remains the seat of the federal government today. The "
            "city is world-famous for the statue of Christ the Redeemer on Corcovado, Sugarloaf Mountain, the "
            "beaches of Copacabana and Ipanema, and its spectacular annual Carnival. It also hosted the 2016 Summer "
            "Olympics, the first Olympic Games held in South America, and its Maracanã stadium has staged two FIFA "
            "World Cup finals.",
        ),
    ),
    Q(
        "What is the capital of Egypt?",
        "Cairo",
        C("short", "Cairo"),
        C(
            "wrong-verbose",
            "Egypt's capital is Alexandria, the great Mediterranean port founded by Alexander the Great.",
        ),
    ),
    Q(
        "What is the capital of Kenya?",
        "Nairobi",
        C("short", "Nairobi"),
        C("over-hedged", "Possibly Nairobi, but it might be Mombasa.", human="no", h2="yes"),
        C("markdown", md("Nairobi", "Kenya's largest city", "Located in the south-central part of the country")),
    ),
    Q(
        "What is the capital of Italy?",
        "Rome",
        C("short", "Rome"),
        C("over-hedged", "Rome or Milan; I can't say for certain which.", human="no"),
        C(
            "wrong-markdown",
            md("Milan", "Italy's financial and fashion capital", "Home to the Italian Stock Exchange"),
        ),
    ),
    Q(
        "What is the largest country in the world by area?",
        "Russia | Russian Federation",
        C("short", "Russia"),
        C(
            "wrong-verbose",
            "Canada is the largest country in the world by area, stretching from the Atlantic to the Pacific and "
            "north into the Arctic.",
        ),
        C("markdown", md("Russia", "About 17.1 million square kilometres", "Spans eleven time zones")),
    ),
    # ---- science
    Q(
        "What is the chemical symbol for gold?",
        "Au",
        C("markdown", md("Au", "From the Latin *aurum*", "Atomic number 79")),
        C("near-miss", "Ag"),
        C("sentence", "Gold's chemical symbol is Au, from the Latin word aurum."),
    ),
    Q(
        'Which planet is known as the "Red Planet"?',
        "Mars",
        C("short", "Mars"),
        C(
            "markdown",
            md(
                "Mars",
                "Fourth planet from the Sun",
                "Its reddish colour comes from iron oxide (rust) in its surface dust",
            ),
        ),
        C(
            "wrong-markdown",
            md("Jupiter", "Its Great Red Spot gives it a reddish appearance", "Largest planet in the Solar System"),
        ),
    ),
    Q(
        "What is the largest planet in the Solar System?",
        "Jupiter",
        C("short", "Jupiter"),
        C(
            "wrong-verbose",
            "Saturn is the largest planet in the Solar System; its enormous ring system makes it wider than any "
            "other planet, and it has more than eighty known moons.",
        ),
        C("partial", "Jupiter, which is about ten times the mass of Earth.", human="yes", h2="no"),
    ),
    Q(
        "How many bones are there in the adult human body?",
        "206",
        C("sentence", "A typical adult human skeleton has 206 bones."),
        C("near-miss", "208"),
        C("imprecise", "Around 200.", human="no", h2="yes"),
    ),
    Q(
        "What is the chemical formula of water?",
        "H2O",
        C("short", "H2O"),
        C("format", "H₂O"),
        C("wrong-short", "HO2"),
    ),
    Q(
        "Which gas do plants absorb from the atmosphere for photosynthesis?",
        "Carbon dioxide | CO2",
        C(
            "wrong-verbose",
            "Plants absorb oxygen from the atmosphere during photosynthesis and use it, together with water and "
            "sunlight, to build sugars; carbon dioxide is released as a by-product.",
        ),
        C("format", "CO₂"),
    ),
    Q(
        "What is the approximate speed of light in a vacuum?",
        "299,792 km/s | 300,000 km/s | 299,792,458 m/s | 3 × 10^8 m/s",
        C("short", "300,000 km/s"),
        C("format", "About 186,000 miles per second.", h2="no"),
        C("near-miss", "About 300,000 km per hour."),
    ),
    Q(
        "What is the hardest naturally occurring substance?",
        "Diamond",
        C("near-miss", "Corundum"),
        C(
            "verbose",
            "Diamond is the hardest naturally occurring substance, rating 10 on the Mohs scale, because each "
            "carbon atom is strongly bonded to four others in a rigid lattice.",
        ),
    ),
    Q(
        "What is the atomic number of carbon?",
        "6",
        C("format", "Six."),
        C(
            "wrong-verbose",
            "Carbon has an atomic number of 12, which is why the isotope carbon-12 is used as the standard for "
            "atomic masses.",
        ),
    ),
    Q(
        "Who proposed the general theory of relativity?",
        "Albert Einstein | Einstein",
        C("short", "Albert Einstein"),
        C("wrong-short", "Isaac Newton"),
        C(
            "long",
            "The general theory of relativity was proposed by Albert Einstein, who published its final form in "
            "1915. Building on his special theory of relativity from 1905, Einstein described gravity not as a "
            "force acting at a distance, as in Newton's theory, but as the curvature of spacetime caused by mass "
            "and energy. The theory explained the anomalous precession of Mercury's orbit and predicted that light "
            "bends around massive objects, which was confirmed during the solar eclipse of 1919. Another "
            "prediction, gravitational waves, was finally detected directly by the LIGO observatories in 2015, a "
            "century after the theory appeared.",
        ),
    ),
    Q(
        'Which organelle is known as the "powerhouse of the cell"?',
        "Mitochondrion | Mitochondria",
        C(
            "wrong-markdown",
            md("The nucleus", "Contains the cell's DNA", "Controls the cell's activities and energy production"),
        ),
        C(
            "sentence",
            "The mitochondria are called the powerhouse of the cell because they produce most of its ATP.",
        ),
    ),
    Q(
        "What is the boiling point of water at sea level, in degrees Celsius?",
        "100 | 100 °C | 100 degrees Celsius",
        C("short", "100"),
        C("format", "100°C"),
        C("partial", "212 °F", human="no", h2="yes"),
    ),
    Q(
        "Which blood type is known as the universal donor for red blood cells?",
        "O negative | O-negative",
        C("short", "O negative"),
        C("partial", "Type O", human="no", h2="yes"),
        C(
            "wrong-long",
            "The universal donor blood type is AB positive. Because people with AB positive blood carry both the A "
            "and B antigens as well as the Rh factor, their blood contains every major marker found in the "
            "population, which means it can be safely transfused into patients of any other blood group. For this "
            "reason hospitals keep large reserves of AB positive blood for emergencies, when there is no time to "
            "test a patient's type. It is also one of the rarest blood types, found in only a few percent of "
            "people, which is why blood services regularly appeal for AB positive donors.",
        ),
    ),
    Q(
        "Apart from the Sun, which star is closest to Earth?",
        "Proxima Centauri",
        C("short", "Proxima Centauri"),
        C("partial", "Alpha Centauri", human="no", h2="yes"),
        C(
            "wrong-verbose",
            "Sirius is the closest star to Earth after the Sun; it is only about 8.6 light-years away, which is why "
            "it appears as the brightest star in the night sky.",
        ),
    ),
    Q(
        "What is the most abundant gas in Earth's atmosphere?",
        "Nitrogen",
        C(
            "wrong-verbose",
            "Oxygen is the most abundant gas in Earth's atmosphere, making up roughly 78% of the air we breathe, "
            "which is why our lungs have evolved to extract it so efficiently.",
        ),
        C("sentence", "Nitrogen, about 78% of the atmosphere by volume."),
    ),
    Q(
        "How many chromosomes does a human body cell typically have?",
        "46",
        C("markdown", md("46", "Arranged in 23 pairs", "22 pairs of autosomes plus one pair of sex chromosomes")),
        C("format", "23 pairs, so 46 in total."),
        C(
            "wrong-verbose",
            "Humans typically have 48 chromosomes arranged in 24 pairs, the same number as our closest relatives, "
            "the chimpanzees.",
        ),
    ),
    Q(
        "What is the largest mammal?",
        "Blue whale",
        C("short", "Blue whale"),
        C(
            "wrong-verbose",
            "The largest mammal is the African elephant, which can weigh more than six tonnes and stand over three "
            "metres tall at the shoulder.",
        ),
        C(
            "markdown",
            md("The blue whale", "Can reach about 30 metres in length", "The largest animal known to have ever lived"),
        ),
    ),
    Q(
        "How many legs does a spider have?",
        "8 | eight",
        C("short", "Eight."),
        C(
            "wrong-verbose",
            "Spiders have six legs, like all insects, arranged in three pairs attached to the thorax.",
        ),
    ),
    Q(
        "What is the largest organ of the human body?",
        "Skin | the skin",
        C("short", "Skin"),
        C(
            "wrong-verbose",
            "The liver is the largest organ of the human body, weighing about 1.5 kilograms in an adult.",
        ),
        C(
            "long",
            "The largest organ of the human body is the skin. In an average adult it covers a surface area of "
            "roughly 1.5 to 2 square metres and accounts for about 15% of total body weight. The skin has three "
            "main layers: the epidermis, which forms a waterproof protective barrier; the dermis, which contains "
            "blood vessels, nerves, hair follicles and sweat glands; and the deeper subcutaneous tissue, which "
            "stores fat and provides insulation. Besides protecting the body from infection and injury, it helps "
            "regulate temperature, lets us feel touch, heat and pain, and produces vitamin D when exposed to "
            "sunlight.",
        ),
    ),
    Q(
        "Which chemical element has the symbol Fe?",
        "Iron",
        C("wrong-short", "Fluorine"),
        C("sentence", "Fe is iron; the symbol comes from the Latin word ferrum."),
    ),
    Q(
        "What is the freezing point of water at sea level, in degrees Fahrenheit?",
        "32 °F | 32 | 32 degrees Fahrenheit",
        C(
            "wrong-verbose",
            "Water freezes at 0 degrees Fahrenheit, which is why the Fahrenheit scale starts at the freezing point "
            "of water.",
        ),
        C("format", "32°F"),
    ),
    Q(
        "Who developed the first polio vaccine, licensed in 1955?",
        "Jonas Salk | Salk",
        C("short", "Jonas Salk"),
        C("near-miss", "Albert Sabin"),
        C(
            "wrong-markdown",
            md("Edward Jenner", "Pioneer of vaccination", "Developed the vaccine using a weakened virus"),
        ),
    ),
    Q(
        "Who discovered penicillin?",
        "Alexander Fleming | Fleming",
        C("short", "Alexander Fleming"),
        C("verbose", "Sir Alexander Fleming discovered penicillin in 1928 at St Mary's Hospital in London."),
        C(
            "wrong-markdown",
            md("Louis Pasteur", "French microbiologist", "Discovered penicillin while studying bacteria in 1928"),
        ),
    ),
    Q(
        "Which planet is closest to the Sun?",
        "Mercury",
        C(
            "wrong-verbose",
            "Venus is the planet closest to the Sun, which is why it is the hottest planet in the Solar System.",
        ),
        C("sentence", "Mercury, which orbits at an average distance of about 58 million km from the Sun."),
    ),
    Q(
        'In computing, what does "CPU" stand for?',
        "Central processing unit",
        C("short", "Central processing unit"),
        C("wrong-short", "Computer Personal Unit"),
        C(
            "markdown",
            md(
                "Central Processing Unit",
                "The main processor that executes program instructions",
                "Often called the 'brain' of the computer",
            ),
        ),
    ),
    Q(
        "What is the longest bone in the human body?",
        "Femur | thigh bone",
        C("short", "Femur"),
        C("near-miss", "Tibia"),
        C(
            "markdown",
            md("The femur (thigh bone)", "Runs from the hip to the knee", "Also the strongest bone in the body"),
        ),
    ),
    Q(
        "Who invented the World Wide Web?",
        "Tim Berners-Lee",
        C("short", "Tim Berners-Lee"),
        C("format", "Tim Berners Lee"),
        C(
            "wrong-verbose",
            "The World Wide Web was invented by Vint Cerf, who designed the TCP/IP protocols at CERN in the early "
            "1990s.",
        ),
    ),
    Q(
        "What is the chemical symbol for potassium?",
        "K",
        C("near-miss", "P"),
        C("sentence", "Potassium's symbol is K, from its Latin name kalium."),
        C("hedged", "Maybe K? I'm not sure.", h2="no"),
    ),
    # ---- history
    Q(
        "In what year did the Apollo 11 Moon landing take place?",
        "1969 | July 1969",
        C(
            "markdown",
            md(
                "1969",
                "The landing took place on 20 July 1969",
                "Crew: Neil Armstrong, Buzz Aldrin and Michael Collins",
            ),
        ),
        C("format", "20 July 1969"),
        C("near-miss", "1968"),
    ),
    Q(
        "Who was the first President of the United States?",
        "George Washington | Washington",
        C("short", "George Washington"),
        C(
            "wrong-markdown",
            md("Thomas Jefferson", "Author of the Declaration of Independence", "Took office in 1789"),
        ),
        C(
            "long",
            "The first President of the United States was George Washington. After commanding the Continental "
            "Army during the American Revolutionary War, he presided over the Constitutional Convention in 1787 and "
            "was then unanimously chosen by the Electoral College. He was inaugurated on 30 April 1789 in New York "
            "City, which was the temporary seat of government at the time. Washington served two four-year terms "
            "and declined to seek a third, setting a precedent that lasted until Franklin D. Roosevelt and was "
            "later written into the Constitution by the Twenty-second Amendment.",
        ),
    ),
    Q(
        "In what year did the Second World War end?",
        "1945",
        C("sentence", "It ended in 1945: Germany surrendered in May and Japan in September."),
        C("near-miss", "1944"),
        C("hedged", "I believe it was 1945, but I'm not entirely sure.", h2="no"),
    ),
    Q(
        "Who was the first person to walk on the Moon?",
        "Neil Armstrong",
        C("short", "Neil Armstrong"),
        C("alias", "Armstrong"),
        C(
            "wrong-long",
            "The first person to walk on the Moon was Buzz Aldrin. As the lunar module pilot of Apollo 11, Aldrin "
            "was the first astronaut to climb down the ladder of the Eagle on 20 July 1969, while his crewmate "
            "stayed behind to operate the cameras and Michael Collins remained in orbit aboard the command module "
            "Columbia. Aldrin's famous words as he stepped onto the surface were broadcast live to an estimated "
            "600 million people around the world, and he went on to plant the American flag and set up scientific "
            "experiments in the Sea of Tranquility.",
        ),
    ),
    Q(
        "In what year did the Berlin Wall fall?",
        "1989",
        C(
            "markdown",
            md(
                "1989",
                "The border crossings opened on the night of 9 November 1989",
                "Germany was reunified in October 1990",
            ),
        ),
        C("format", "November 9, 1989"),
        C(
            "wrong-verbose",
            "The Berlin Wall fell in 1991, at the same time as the collapse of the Soviet Union, which finally ended "
            "the Cold War division of Germany.",
        ),
    ),
    Q(
        "Which US president was assassinated in Dallas in November 1963?",
        "John F. Kennedy | John Kennedy",
        C("alias", "JFK"),
        C("sentence", "President John F. Kennedy was assassinated in Dallas on 22 November 1963."),
        C("near-miss", "Robert F. Kennedy"),
        C("alias", "Kennedy", h2="no"),
    ),
    Q(
        "Which ocean liner sank in April 1912 after hitting an iceberg?",
        "Titanic | RMS Titanic",
        C("short", "The Titanic"),
        C(
            "wrong-verbose",
            "The ship was the RMS Lusitania, the luxury Cunard liner that struck an iceberg in the North Atlantic "
            "on its maiden voyage.",
        ),
    ),
    Q(
        "Who was the first woman to win a Nobel Prize?",
        "Marie Curie | Marie Skłodowska-Curie",
        C("short", "Marie Curie"),
        C("alias", "Madame Curie"),
        C(
            "wrong-verbose",
            "Rosalind Franklin was the first woman to win a Nobel Prize, honoured for the X-ray images that "
            "revealed the double-helix structure of DNA.",
        ),
    ),
    Q(
        "In which year did Christopher Columbus first reach the Americas?",
        "1492",
        C("short", "1492"),
        C("near-miss", "1493"),
        C("imprecise", "In the late 1400s.", human="no", h2="yes"),
    ),
    Q(
        "Which civilisation built Machu Picchu?",
        "Inca Empire | Inca | Incas",
        C("short", "The Incas"),
        C(
            "wrong-markdown",
            md("The Aztec Empire", "Built in the 15th century", "Located high in the Andes mountains"),
        ),
        C(
            "verbose",
            "It was built by the Inca in the 15th century, probably as an estate for the emperor Pachacuti.",
        ),
    ),
    Q(
        "Who was the principal author of the US Declaration of Independence?",
        "Thomas Jefferson | Jefferson",
        C(
            "wrong-verbose",
            "Benjamin Franklin was the principal author of the Declaration of Independence; Jefferson and Adams "
            "only made minor edits to his draft.",
        ),
        C("sentence", "Jefferson wrote the first draft, which John Adams and Benjamin Franklin then edited."),
    ),
    Q(
        "What was the first artificial satellite launched into orbit?",
        "Sputnik 1 | Sputnik",
        C("short", "Sputnik"),
        C(
            "wrong-verbose",
            "The first artificial satellite was Explorer 1, launched by the United States in January 1958 at the "
            "start of the Space Race.",
        ),
        C(
            "markdown",
            md(
                "Sputnik 1",
                "Launched by the Soviet Union on 4 October 1957",
                "Transmitted radio signals for about three weeks",
            ),
        ),
    ),
    Q(
        "Which of the Seven Wonders of the Ancient World stood in Alexandria?",
        "Lighthouse of Alexandria | Pharos of Alexandria | Pharos",
        C("short", "The Lighthouse of Alexandria"),
        C("wrong-short", "The Library of Alexandria"),
        C("alias", "The Pharos lighthouse", h2="no"),
    ),
    Q(
        "Who was the British prime minister for most of the Second World War?",
        "Winston Churchill | Churchill",
        C(
            "markdown",
            md("Winston Churchill", "Prime minister from May 1940 to July 1945", "Led a wartime coalition government"),
        ),
        C("near-miss", "Neville Chamberlain"),
        C("verbose", "Sir Winston Churchill, who was prime minister from May 1940 to July 1945."),
    ),
    Q(
        "In which year did the French Revolution begin?",
        "1789",
        C("near-miss", "1799"),
        C("sentence", "It began in 1789; the storming of the Bastille took place on 14 July that year."),
        C("imprecise", "Towards the end of the 18th century.", human="no", h2="yes"),
    ),
    Q(
        "Who was the first emperor of Rome?",
        "Augustus | Octavian | Caesar Augustus",
        C("near-miss", "Julius Caesar"),
        C("alias", "Augustus Caesar"),
        C(
            "long",
            "The first Roman emperor was Augustus. Born Gaius Octavius in 63 BC, he was the great-nephew and "
            "adopted heir of Julius Caesar. After Caesar's assassination in 44 BC he formed the Second Triumvirate "
            "with Mark Antony and Lepidus, and later defeated Antony and Cleopatra at the Battle of Actium in 31 BC. "
            "In 27 BC the Senate granted him the title Augustus, which is usually taken as the start of the Roman "
            "Empire. Although Julius Caesar held enormous power as dictator, he never ruled as emperor, so Augustus "
            "is regarded as the first. He reigned until his death in AD 14.",
        ),
    ),
    # ---- arts and literature
    Q(
        'Who wrote the novel "Pride and Prejudice"?',
        "Jane Austen | Austen",
        C("short", "Jane Austen"),
        C(
            "wrong-verbose",
            "Pride and Prejudice was written by Charlotte Brontë and published in 1813, several years before her "
            "better-known novel Jane Eyre.",
        ),
        C("markdown", md("Jane Austen", "Published in 1813", "Her other novels include *Emma* and *Persuasion*")),
    ),
    Q(
        "Who painted the Mona Lisa?",
        "Leonardo da Vinci | Leonardo | da Vinci",
        C("short", "Leonardo da Vinci"),
        C(
            "wrong-markdown",
            md("Michelangelo", "Painted in the early 16th century", "Now displayed in the Louvre, Paris"),
            h2="yes",
        ),
        C(
            "long",
            "The Mona Lisa was painted by the Italian Renaissance artist Leonardo da Vinci. He began work on the "
            "portrait in Florence around 1503 and kept refining it for many years, possibly until shortly before "
            "his death in 1519. The sitter is widely believed to be Lisa Gherardini, the wife of the Florentine "
            "merchant Francesco del Giocondo, which is why the painting is also known as La Gioconda. It is painted "
            "in oil on a poplar wood panel and is famous for the soft sfumato shading around the eyes and mouth. "
            "Since the French Revolution it has belonged to the collection of the Louvre in Paris.",
        ),
    ),
    Q(
        'Who composed "The Four Seasons"?',
        "Antonio Vivaldi | Vivaldi",
        C("wrong-short", "Johann Sebastian Bach"),
        C(
            "verbose",
            "The Four Seasons is a set of four violin concertos by the Venetian Baroque composer Antonio Vivaldi, "
            "published in 1725.",
        ),
        C("partial", "Vivaldi, the German Baroque composer.", human="yes", h2="no"),
    ),
    Q(
        'Who wrote "One Hundred Years of Solitude"?',
        "Gabriel García Márquez | García Márquez | Gabriel Garcia Marquez",
        C("short", "Gabriel Garcia Marquez"),
        C("alias", "Gabo", h2="no"),
        C(
            "wrong-verbose",
            "One Hundred Years of Solitude was written by the Argentine author Jorge Luis Borges, a landmark of "
            "magical realism set in the fictional town of Macondo.",
        ),
    ),
    Q(
        'Who wrote the play "Romeo and Juliet"?',
        "William Shakespeare | Shakespeare",
        C("short", "Shakespeare"),
        C("wrong-short", "Christopher Marlowe"),
        C("alias", "The Bard of Avon"),
    ),
    Q(
        "In which city is the Louvre museum?",
        "Paris",
        C("short", "Paris"),
        C("format", "Paris, France"),
        C("wrong-short", "Lyon"),
    ),
    Q(
        'Who painted "The Starry Night"?',
        "Vincent van Gogh | van Gogh",
        C("markdown", md("Vincent van Gogh", "Painted in June 1889", "Held by the Museum of Modern Art in New York")),
        C(
            "wrong-markdown",
            md("Claude Monet", "Painted in 1889", "A masterpiece of French Impressionism"),
            h2="yes",
        ),
        C(
            "sentence",
            "Vincent van Gogh painted The Starry Night in 1889 while staying at the asylum in Saint-Rémy-de-Provence.",
        ),
    ),
    Q(
        'Who wrote the novel "Nineteen Eighty-Four"?',
        "George Orwell | Orwell",
        C("short", "George Orwell"),
        C("alias", "Eric Blair"),
        C(
            "wrong-verbose",
            "Nineteen Eighty-Four was written by Aldous Huxley, whose dystopian vision of Big Brother and constant "
            "surveillance became a classic of 20th-century literature.",
        ),
    ),
    Q(
        'Who composed the opera "The Magic Flute"?',
        "Wolfgang Amadeus Mozart | Mozart",
        C("short", "Mozart"),
        C(
            "wrong-verbose",
            "The Magic Flute was composed by Ludwig van Beethoven in 1791, and it was the only opera he ever wrote.",
        ),
        C(
            "markdown",
            md(
                "Wolfgang Amadeus Mozart",
                "Premiered in Vienna in 1791",
                "A *Singspiel* with a German libretto by Emanuel Schikaneder",
            ),
        ),
    ),
    Q(
        "Which artist carved the marble statue of David (1501-1504) in Florence?",
        "Michelangelo | Michelangelo Buonarroti",
        C("short", "Michelangelo"),
        C("near-miss", "Donatello"),
        C(
            "verbose",
            "Michelangelo carved the David from a single block of marble between 1501 and 1504; the statue now "
            "stands in the Galleria dell'Accademia in Florence.",
        ),
    ),
    Q(
        'In "The Lord of the Rings", which hobbit carries the One Ring to Mount Doom?',
        "Frodo Baggins | Frodo",
        C("short", "Frodo"),
        C("near-miss", "Bilbo Baggins"),
        C("sentence", "Frodo Baggins is the Ring-bearer, although Sam carries the Ring for a short time."),
    ),
    Q(
        'Who is the ancient Greek poet traditionally credited with "The Odyssey"?',
        "Homer",
        C("short", "Homer"),
        C(
            "wrong-verbose",
            "The Odyssey was written by the Roman poet Virgil as a sequel to his Aeneid.",
        ),
        C(
            "hedged",
            "It's traditionally attributed to Homer, though scholars debate whether a single poet composed it.",
        ),
    ),
    Q(
        'Who wrote "On the Origin of Species"?',
        "Charles Darwin | Darwin",
        C("short", "Charles Darwin"),
        C("hedged", "I'm fairly sure it was Charles Darwin."),
        C(
            "wrong-markdown",
            md("Alfred Russel Wallace", "Published in 1859", "Introduced the theory of evolution by natural selection"),
        ),
    ),
    # ---- sport
    Q(
        "How many players does each team have on the field in a football (soccer) match?",
        "11 | eleven",
        C("short", "11"),
        C("sentence", "Eleven, including the goalkeeper."),
        C("wrong-short", "9"),
    ),
    Q(
        "In which country did the Olympic Games originate?",
        "Greece | Ancient Greece",
        C("short", "Greece"),
        C(
            "wrong-verbose",
            "The Olympic Games originated in ancient Rome, where athletic contests were held in honour of Jupiter "
            "at the Circus Maximus.",
        ),
        C("markdown", md("Ancient Greece", "First recorded Games at Olympia in 776 BC", "Held in honour of Zeus")),
    ),
    Q(
        "How many rings are on the Olympic flag?",
        "5 | five",
        C("short", "Five"),
        C("wrong-short", "Six"),
        C("sentence", "The Olympic flag shows five interlocking rings."),
    ),
    Q(
        "In tennis, what is a score of zero called?",
        "Love",
        C("short", "Love"),
        C(
            "wrong-verbose",
            "A score of zero in tennis is called deuce, a term that comes from the French word for 'two'.",
        ),
        C("sentence", 'It\'s called "love".'),
    ),
    Q(
        "In American football, how many points is a touchdown worth (before any extra point)?",
        "6 | six",
        C("short", "6"),
        C("near-miss", "7"),
        C(
            "verbose",
            "A touchdown is worth six points, after which the scoring team can try for one extra point with a kick "
            "or two points with a conversion play.",
        ),
    ),
    Q(
        "Which country won the first FIFA World Cup in 1930?",
        "Uruguay",
        C("short", "Uruguay"),
        C("near-miss", "Argentina", h2="yes"),
        C(
            "wrong-verbose",
            "Brazil won the first FIFA World Cup in 1930, the start of its record run of titles.",
        ),
    ),
    Q(
        "How long is a marathon?",
        "42.195 km | 42.195 kilometres | 26.2 miles | 26 miles 385 yards",
        C("format", "About 26.2 miles (42.195 km)."),
        C("near-miss", "40 km"),
        C("imprecise", "Roughly 42 kilometres.", human="yes", h2="no"),
    ),
    Q(
        "In which sport is the Stanley Cup awarded?",
        "Ice hockey | hockey",
        C("markdown", md("Ice hockey", "Awarded to the National Hockey League champions", "First presented in 1893")),
        C("wrong-short", "Baseball"),
        C("sentence", "The Stanley Cup is the NHL's championship trophy, so the sport is ice hockey."),
    ),
    Q(
        "How many holes are played in a standard round of golf?",
        "18 | eighteen",
        C("short", "18"),
        C("wrong-short", "9"),
    ),
    # ---- mathematics
    Q(
        "What is the square root of 144?",
        "12",
        C("short", "12"),
        C("format", "Twelve"),
        C("wrong-short", "14"),
    ),
    Q(
        "What is the value of pi to two decimal places?",
        "3.14",
        C("short", "3.14"),
        C("near-miss", "3.15"),
        C("partial", "3.1416", human="no", h2="yes"),
    ),
    Q(
        "How many sides does a hexagon have?",
        "6 | six",
        C("short", "6"),
        C(
            "wrong-markdown",
            md("8 sides", "*Hex* is the Greek word for eight", "A stop sign is a regular hexagon"),
        ),
        C("sentence", "A hexagon has six sides."),
    ),
    Q(
        "What is 15% of 200?",
        "30",
        C("short", "30"),
        C("wrong-verbose", "To find 15% of 200, divide 200 by 15, which gives approximately 13.3."),
        C("markdown", md("30", "10% of 200 = 20", "5% of 200 = 10, and 20 + 10 = **30**")),
    ),
    Q(
        "What is the sum of the interior angles of a triangle, in degrees?",
        "180 | 180 degrees",
        C("short", "180 degrees"),
        C("format", "180°"),
        C(
            "wrong-verbose",
            "The interior angles of any triangle add up to 360 degrees, the same as a full turn.",
        ),
    ),
    Q(
        "What is the smallest prime number?",
        "2 | two",
        C("short", "2"),
        C(
            "wrong-verbose",
            "The smallest prime number is 1, because it can only be divided by 1 and itself.",
        ),
        C("markdown", md("2", "It is the only even prime number", "1 is not considered a prime number")),
    ),
    Q(
        "What is 7 multiplied by 8?",
        "56",
        C("short", "56"),
        C("near-miss", "54"),
        C("format", "7 × 8 = 56"),
    ),
    Q(
        "Which ancient Greek mathematician is the theorem a² + b² = c² for right triangles named after?",
        "Pythagoras",
        C(
            "markdown",
            md(
                "Pythagoras",
                "Greek philosopher and mathematician of the 6th century BC",
                "The relation was known to Babylonian mathematicians even earlier",
            ),
        ),
        C(
            "wrong-verbose",
            "The theorem is named after Euclid, who first stated it in his Elements around 300 BC.",
        ),
        C("alias", "Pythagoras of Samos"),
    ),
    Q(
        "How many degrees are there in a right angle?",
        "90 | 90 degrees",
        C("short", "90"),
        C("sentence", "A right angle measures 90°."),
        C("wrong-short", "180"),
    ),
    # ---- language and everyday knowledge
    Q(
        "What is the main language spoken in Brazil?",
        "Portuguese",
        C("short", "Portuguese"),
        C(
            "wrong-verbose",
            "The main language of Brazil is Spanish, as in most of the other countries of South America.",
        ),
        C("alias", "Brazilian Portuguese"),
    ),
    Q(
        "What is the currency of Japan?",
        "Yen | Japanese yen",
        C("short", "Yen"),
        C("alias", "JPY", h2="no"),
        C("near-miss", "Won"),
    ),
]


# -- pairwise preference set --------------------------------------------------
# (category, prompt, better, worse, reason). Position (a/b) is assigned later.

LENGTH_TRAP = "length-trap"
FORMAT_TRAP = "format-trap"
CORRECT_VS_WRONG = "correct-vs-wrong"
LONGER_BETTER = "longer-better"

PAIRS = [
    # ---- correct vs wrong
    (
        CORRECT_VS_WRONG,
        "What is the capital of Canada?",
        "Ottawa.",
        "Toronto.",
        "Ottawa is the capital; Toronto is only the largest city.",
    ),
    (
        CORRECT_VS_WRONG,
        "How many minutes are there in a day?",
        "1,440 minutes (24 × 60).",
        "1,200 minutes.",
        "24 × 60 = 1,440; 1,200 is an arithmetic error.",
    ),
    (
        CORRECT_VS_WRONG,
        'Who wrote "Hamlet"?',
        "William Shakespeare.",
        "Charles Dickens.",
        "Hamlet is by Shakespeare; Dickens wrote novels two centuries later.",
    ),
    (
        CORRECT_VS_WRONG,
        "What is the boiling point of water at sea level in Fahrenheit?",
        "212 °F.",
        "100 °F.",
        "Water boils at 212 °F; 100 is the Celsius figure.",
    ),
    (
        CORRECT_VS_WRONG,
        "Convert 5 kilometres to metres.",
        "5,000 metres.",
        "500 metres.",
        "One kilometre is 1,000 metres, so 5 km is 5,000 m.",
    ),
    (
        CORRECT_VS_WRONG,
        "What is the chemical symbol for sodium?",
        "Na",
        "So",
        "Sodium's symbol is Na (from natrium); So is not an element symbol.",
    ),
    (
        CORRECT_VS_WRONG,
        "Which planet has the most prominent ring system?",
        "Saturn.",
        "Mars.",
        "Saturn's rings are by far the most prominent; Mars has no rings.",
    ),
    (CORRECT_VS_WRONG, "What is 12 × 12?", "144", "124", "12 × 12 = 144."),
    (CORRECT_VS_WRONG, "In what year did the Titanic sink?", "1912.", "1915.", "The Titanic sank in April 1912."),
    (
        CORRECT_VS_WRONG,
        "What is the largest continent by area?",
        "Asia.",
        "Africa.",
        "Asia is the largest continent; Africa is second.",
    ),
    (
        CORRECT_VS_WRONG,
        "Who painted the ceiling of the Sistine Chapel?",
        "Michelangelo.",
        "Raphael.",
        "Michelangelo painted the ceiling between 1508 and 1512.",
    ),
    (CORRECT_VS_WRONG, "What is 9 squared?", "81", "18", "9 × 9 = 81; 18 is 9 × 2."),
    (
        CORRECT_VS_WRONG,
        "What is the capital of Japan?",
        "Tokyo.",
        "Kyoto.",
        "Tokyo is the capital; Kyoto was the imperial capital until 1869.",
    ),
    (
        CORRECT_VS_WRONG,
        'Translate "thank you" into Spanish.',
        "Gracias.",
        "Merci.",
        "Gracias is Spanish; merci is French.",
    ),
    (CORRECT_VS_WRONG, "How many sides does a pentagon have?", "Five.", "Six.", "A pentagon has five sides."),
    (
        CORRECT_VS_WRONG,
        "What is the freezing point of water in Celsius?",
        "0 °C.",
        "32 °C.",
        "Water freezes at 0 °C; 32 is the Fahrenheit figure.",
    ),
    (
        CORRECT_VS_WRONG,
        "Which organ pumps blood around the human body?",
        "The heart.",
        "The lungs.",
        "The heart pumps blood; the lungs exchange gases.",
    ),
    (
        CORRECT_VS_WRONG,
        "Who proposed the theory of evolution by natural selection, together with Alfred Russel Wallace?",
        "Charles Darwin.",
        "Gregor Mendel.",
        "Darwin and Wallace proposed natural selection; Mendel studied heredity.",
    ),
    # ---- length trap: concise and correct vs long, padded and less accurate
    (
        LENGTH_TRAP,
        "What is the capital of Australia?",
        "Canberra.",
        "Australia is a vast and diverse country with many vibrant cities. Its most famous city, Sydney, is home to "
        "the iconic Opera House and Harbour Bridge, and it serves as the nation's capital as well as its economic "
        "heart. Melbourne is also an important cultural centre, known for its coffee, arts scene and sporting events, "
        "while Perth and Brisbane are growing rapidly.",
        "Canberra is the capital; the long answer wrongly names Sydney.",
    ),
    (
        LENGTH_TRAP,
        "When did the Berlin Wall fall?",
        "On 9 November 1989.",
        "The fall of the Berlin Wall was one of the defining moments of the twentieth century. After decades of Cold "
        "War division, mounting protests across Eastern Europe and the weakening of the Soviet Union led to the "
        "opening of the border crossings, which took place in 1991 as the USSR dissolved. Crowds gathered to chip "
        "away at the concrete, and German reunification followed soon after.",
        "The wall fell in November 1989; the padded answer gives 1991.",
    ),
    (
        LENGTH_TRAP,
        "What is the speed of sound in dry air at about 20 °C?",
        "About 343 metres per second.",
        "The speed of sound depends on many factors, including the medium it travels through, the temperature, the "
        "humidity and even the altitude. In solids such as steel it is much faster than in gases. In air at room "
        "temperature, sound travels at roughly 1,000 metres per second, which is why thunder reaches us a few seconds "
        "after we see lightning.",
        "Sound travels at about 343 m/s in air at 20 °C; 1,000 m/s is wrong.",
    ),
    (
        LENGTH_TRAP,
        "How many bones does an adult human have?",
        "206.",
        "The human skeleton is a remarkable structure that provides support, protects vital organs and allows "
        "movement. Bones also store minerals such as calcium and produce blood cells in the marrow. An adult human "
        "body contains around 300 bones, ranging from the tiny stapes in the ear to the long femur in the thigh, "
        "all connected by joints, ligaments and tendons.",
        "Adults have 206 bones; about 300 is the count at birth, before bones fuse.",
    ),
    (
        LENGTH_TRAP,
        "Who was the first person to travel into space?",
        "Yuri Gagarin, on 12 April 1961.",
        "The race to put a human in space was one of the most dramatic contests of the Cold War. Both the United "
        "States and the Soviet Union invested enormous resources in their programmes. In 1961 the American astronaut "
        "Alan Shepard became the first human to reach space aboard Freedom 7, a milestone that opened the era of "
        "human spaceflight.",
        "Gagarin flew first; Shepard followed about three weeks later.",
    ),
    (
        LENGTH_TRAP,
        "What is the largest planet in the Solar System?",
        "Jupiter.",
        "The Solar System contains eight planets, divided into rocky inner planets and gas giants. Among the gas "
        "giants, Saturn stands out as the largest planet thanks to its vast size and spectacular rings, which extend "
        "hundreds of thousands of kilometres into space. It is so light that it would float in water, and it has "
        "dozens of moons, including Titan.",
        "Jupiter is the largest planet; the long answer names Saturn.",
    ),
    (
        LENGTH_TRAP,
        'What does "DNA" stand for?',
        "Deoxyribonucleic acid.",
        "DNA is the molecule that carries genetic information in all living organisms. It has the famous double-helix "
        "shape discovered in 1953 and is made of four bases: adenine, thymine, guanine and cytosine. The letters DNA "
        "stand for deoxyribose nitrogen acid, a name that reflects the sugar and nitrogen-containing bases in its "
        "structure.",
        "DNA stands for deoxyribonucleic acid; the padded expansion is wrong.",
    ),
    (
        LENGTH_TRAP,
        "What is the smallest prime number?",
        "2.",
        "Prime numbers are the building blocks of arithmetic, since every whole number greater than one can be "
        "written as a product of primes. A prime is a number divisible only by 1 and itself. By this definition the "
        "smallest prime number is 1, followed by 2, 3, 5 and 7. Primes are used widely in cryptography today.",
        "2 is the smallest prime; 1 is not prime by definition.",
    ),
    (
        LENGTH_TRAP,
        "Which is larger, 0.5 or 0.45?",
        "0.5 is larger.",
        "When comparing decimals, it helps to look carefully at the digits after the decimal point. In 0.45 there are "
        "two digits, forty-five, while in 0.5 there is only one digit, five. Since forty-five is much bigger than "
        "five, 0.45 is the larger number. This is a common point of confusion for students learning decimals.",
        "0.5 = 0.50 > 0.45; the long answer compares digit counts wrongly.",
    ),
    (
        LENGTH_TRAP,
        "What is the main ingredient of guacamole?",
        "Avocado.",
        "Guacamole is a classic Mexican dip enjoyed around the world with tortilla chips, tacos and burritos. Recipes "
        "vary from family to family, but the base is always ripe tomatoes, mashed together with onion, chilli, "
        "coriander and a generous squeeze of lime juice. Some people also add garlic or cumin for extra flavour.",
        "Guacamole is made from mashed avocado; tomato is an optional extra.",
    ),
    (
        LENGTH_TRAP,
        "How many hours are there in a week?",
        "168.",
        "To work out the number of hours in a week, we multiply the number of days in a week by the number of hours "
        "in a day. A week has 7 days and each day has 24 hours, so 7 × 24 = 148 hours. This figure is useful for "
        "planning schedules, calculating working time and estimating sleep.",
        "7 × 24 = 168; the long answer multiplies wrongly.",
    ),
    (
        LENGTH_TRAP,
        "What is the capital of Nigeria?",
        "Abuja.",
        "Nigeria is Africa's most populous country and one of its largest economies. Its capital and largest city is "
        "Lagos, a sprawling coastal megacity that is home to the country's main port, its stock exchange and a "
        "famous music and film industry known as Nollywood. The city continues to grow at a remarkable pace.",
        "Abuja has been the capital since 1991; Lagos is the largest city.",
    ),
    (
        LENGTH_TRAP,
        'Who wrote "War and Peace"?',
        "Leo Tolstoy.",
        "War and Peace is one of the longest and most celebrated novels ever written. Set during the Napoleonic Wars, "
        "it follows several aristocratic Russian families. It was written by Fyodor Dostoevsky, the great Russian "
        "novelist who also wrote Crime and Punishment, and it is often considered the high point of his career.",
        "War and Peace is by Tolstoy; the long answer credits Dostoevsky.",
    ),
    (
        LENGTH_TRAP,
        "What is the chemical formula for table salt?",
        "NaCl (sodium chloride).",
        "Table salt is one of the most common substances in the kitchen and has been valued for thousands of years "
        "for preserving and flavouring food. Chemically it is sodium chloride, written NaCl₂, because each sodium "
        "atom bonds with two chlorine atoms to form a crystal lattice. It dissolves easily in water.",
        "Sodium chloride is NaCl, one sodium per chlorine; NaCl₂ is wrong.",
    ),
    (
        LENGTH_TRAP,
        "How many players from each team are on the court at once in basketball?",
        "Five.",
        "Basketball is a fast-paced team sport invented by James Naismith in 1891. Teams try to score by shooting the "
        "ball through a hoop ten feet above the floor. Each team has six players on the court at a time: two guards, "
        "two forwards, a centre and a sixth player who rotates between positions, with more substitutes on the bench.",
        "Basketball teams have five players on court; there is no sixth on-court player.",
    ),
    (
        LENGTH_TRAP,
        "In which year did the First World War begin?",
        "1914.",
        "The First World War was a global conflict that reshaped the map of Europe and led to the fall of several "
        "empires. Tensions had been building for years because of alliances, militarism and imperial rivalry. The war "
        "began in 1917, when the United States entered the fighting, and ended with the armistice of November 1918.",
        "The war began in 1914; 1917 is when the US joined.",
    ),
    (
        LENGTH_TRAP,
        "What is the highest mountain in Africa?",
        "Mount Kilimanjaro.",
        "Africa has many impressive mountains, from the Atlas range in the north to the Drakensberg in the south. The "
        "continent's highest peak is Mount Kenya, a snow-capped extinct volcano near the equator that rises well "
        "above the surrounding plains and is a popular destination for climbers from around the world.",
        "Kilimanjaro (5,895 m) is higher than Mount Kenya (5,199 m).",
    ),
    (
        LENGTH_TRAP,
        "At what temperature do the Celsius and Fahrenheit scales show the same number?",
        "−40 degrees.",
        "Celsius and Fahrenheit are the two most widely used temperature scales. Celsius sets the freezing point of "
        "water at 0 and the boiling point at 100, while Fahrenheit uses 32 and 212. Because both scales start from "
        "the freezing point of water, they meet at 0 degrees, which is the only temperature where they agree.",
        "The scales meet at −40; at 0 °C it is 32 °F.",
    ),
    # ---- format trap: plain and correct vs markdown-heavy and wrong
    (
        FORMAT_TRAP,
        "Which element has atomic number 1?",
        "Hydrogen.",
        "## Answer\n\n**Helium** ✅\n\n- Atomic number: **1**\n- Symbol: **He**\n- Group: noble gases",
        "Hydrogen has atomic number 1; helium has 2.",
    ),
    (
        FORMAT_TRAP,
        'Who composed the "Moonlight Sonata"?',
        "Ludwig van Beethoven.",
        "### Composer\n\n**Wolfgang Amadeus Mozart**\n\n| Work | Year |\n|---|---|\n| Moonlight Sonata | 1801 |",
        "The Moonlight Sonata is by Beethoven; Mozart died in 1791.",
    ),
    (
        FORMAT_TRAP,
        "What is the longest river in Africa?",
        "The Nile.",
        "## Longest river in Africa\n\n1. **Congo River** (longest)\n2. Nile\n3. Niger\n\n> The Congo is also the "
        "deepest river in the world.",
        "The Nile is Africa's longest river; the Congo is second.",
    ),
    (
        FORMAT_TRAP,
        "How many strings does a standard guitar have?",
        "Six.",
        "**Answer:** a standard guitar has **7 strings**.\n\n- Tuning: B E A D G B E\n- Used in most rock and pop",
        "A standard guitar has six strings; seven-string guitars are a variant.",
    ),
    (
        FORMAT_TRAP,
        "What is the capital of Spain?",
        "Madrid.",
        "# Capital of Spain\n\n**Barcelona**\n\n- Largest city in Catalonia\n- Seat of the Spanish government",
        "Madrid is the capital of Spain.",
    ),
    (
        FORMAT_TRAP,
        "Which gas makes up about 21% of Earth's atmosphere?",
        "Oxygen.",
        "### Answer\n\n**Nitrogen (N₂)**\n\n| Gas | Share |\n|---|---|\n| Nitrogen | 21% |\n| Oxygen | 78% |",
        "Oxygen is about 21%; nitrogen is about 78%.",
    ),
    (
        FORMAT_TRAP,
        "Who formulated the three laws of motion?",
        "Isaac Newton.",
        "## Laws of motion\n\n**Galileo Galilei** formulated them:\n\n1. Inertia\n2. F = ma\n3. Action and reaction",
        "Newton stated the three laws in the Principia (1687).",
    ),
    (
        FORMAT_TRAP,
        "What is 25% of 80?",
        "20.",
        "### Working\n\n| Step | Value |\n|---|---|\n| 80 ÷ 4 | 25 |\n\n**Answer: 25**",
        "25% of 80 is 80 ÷ 4 = 20.",
    ),
    (
        FORMAT_TRAP,
        "Which ocean lies between Africa and Australia?",
        "The Indian Ocean.",
        "## Answer\n\n- **Pacific Ocean** 🌊\n- Borders: Africa (west), Australia (east)\n- Largest ocean on Earth",
        "The Indian Ocean lies between Africa and Australia.",
    ),
    (
        FORMAT_TRAP,
        'What is the plural of "mouse" when it means the animal?',
        "Mice.",
        '**Plural:** *mouses*\n\n- Regular plural: add **-s**\n- Example: "two mouses ran away"',
        "The plural of the animal is mice.",
    ),
    (
        FORMAT_TRAP,
        "In which country are the pyramids of Giza?",
        "Egypt.",
        "## Location\n\n**Sudan** 🇸🇩\n\n- Near the Nile\n- Built around 2500 BC",
        "Giza is in Egypt, beside Cairo.",
    ),
    (
        FORMAT_TRAP,
        "Which is the hottest planet in the Solar System?",
        "Venus.",
        "### Hottest planet\n\n**Mercury** ☀️\n\n- Closest planet to the Sun\n- Therefore the highest temperatures",
        "Venus is hottest because of its thick CO₂ atmosphere, despite Mercury being closer.",
    ),
    (
        FORMAT_TRAP,
        "Which vitamin does the skin make when exposed to sunlight?",
        "Vitamin D.",
        "## Answer\n\n**Vitamin C** 🍊\n\n- Produced in the skin under UV light\n- Supports the immune system",
        "Skin makes vitamin D; humans cannot make vitamin C.",
    ),
    (
        FORMAT_TRAP,
        "Who was the first woman to fly solo across the Atlantic Ocean?",
        "Amelia Earhart, in 1932.",
        "### Aviation pioneer\n\n**Bessie Coleman**\n\n- First solo transatlantic flight by a woman\n- Year: 1932",
        "Amelia Earhart made the flight in 1932.",
    ),
    (
        FORMAT_TRAP,
        "What is the decimal number 5 written in binary?",
        "101",
        "## Conversion\n\n| Decimal | Binary |\n|---|---|\n| 5 | **110** |",
        "5 = 4 + 1 = 101 in binary; 110 is 6.",
    ),
    (
        FORMAT_TRAP,
        "Which country gave the Statue of Liberty to the United States?",
        "France.",
        "## Answer\n\n**The United Kingdom** 🇬🇧\n\n- Gift dedicated in 1886\n- Symbol of friendship",
        "The statue was a gift from France.",
    ),
    # ---- the better answer is the longer one
    (
        LONGER_BETTER,
        "In two or three sentences, explain why the sky looks blue.",
        "Sunlight contains all colours, and as it passes through the atmosphere the short blue wavelengths are "
        "scattered by air molecules much more than the longer red ones (Rayleigh scattering). That scattered blue "
        "light reaches our eyes from every direction, so the sky looks blue.",
        "Because it reflects the ocean.",
        "Rayleigh scattering is the correct explanation; the sky does not reflect the ocean.",
    ),
    (
        LONGER_BETTER,
        "Name the three primary colours of light.",
        "Red, green and blue.",
        "Red.",
        "All three additive primaries are red, green and blue; the other answer names only one.",
    ),
    (
        LONGER_BETTER,
        "Write a Python function that returns the square of a number.",
        "def square(x):\n    return x * x",
        "Use x^2.",
        "In Python ^ is bitwise XOR, so x^2 does not square; the function is correct.",
    ),
    (
        LONGER_BETTER,
        "List the planets of the Solar System in order from the Sun.",
        "Mercury, Venus, Earth, Mars, Jupiter, Saturn, Uranus, Neptune.",
        "Mercury, Venus, Earth, Mars.",
        "Complete and in order; the other stops after four planets.",
    ),
    (
        LONGER_BETTER,
        "What are the three states of matter usually taught in school?",
        "Solid, liquid and gas.",
        "Solid.",
        "The question asks for three states; only one is given by the other answer.",
    ),
    (
        LONGER_BETTER,
        "How do you convert a temperature from Celsius to Fahrenheit?",
        "Multiply by 9/5 and add 32: F = C × 9/5 + 32. For example, 100 °C = 212 °F.",
        "Add 32.",
        "The full formula is needed; adding 32 alone is wrong except at 0 °C.",
    ),
    (
        LONGER_BETTER,
        'Summarise the plot of "Romeo and Juliet" in one or two sentences.',
        "Two young lovers from the feuding Montague and Capulet families in Verona marry in secret, and a chain of "
        "misunderstandings leads both to take their own lives, which finally reconciles their families.",
        "A love story.",
        "It gives an actual summary; the other is too vague to be useful.",
    ),
    (
        LONGER_BETTER,
        "Why does Earth have seasons?",
        "Because Earth's axis is tilted by about 23.4°, each hemisphere leans towards the Sun for part of the year "
        "and away from it for the rest, changing how directly sunlight strikes it and how long the days are.",
        "Because Earth is closer to the Sun in summer.",
        "Axial tilt causes seasons; Earth is actually closest to the Sun in January.",
    ),
    (
        LONGER_BETTER,
        "What is the difference between weather and climate?",
        "Weather is the short-term state of the atmosphere (today's rain or temperature), while climate is the "
        "average pattern of weather in a region over long periods, typically 30 years or more.",
        "They are the same thing.",
        "Weather and climate differ in time scale; they are not the same.",
    ),
    (
        LONGER_BETTER,
        "Briefly, how do vaccines work?",
        "A vaccine exposes the immune system to a harmless form or piece of a pathogen, so it learns to recognise it "
        "and builds memory cells and antibodies; if the real pathogen appears later, the body can respond quickly.",
        "They kill viruses directly.",
        "Vaccines train the immune system; they do not kill viruses directly.",
    ),
    (
        LONGER_BETTER,
        "Give the formula for the area of a circle and use it for a radius of 3.",
        "A = πr². For r = 3, A = 9π ≈ 28.27 square units.",
        "2πr = 18.85.",
        "Uses the area formula correctly; the other computes the circumference.",
    ),
    (
        LONGER_BETTER,
        "What is a leap year?",
        "A year with 366 days instead of 365: an extra day, 29 February, keeps the calendar in step with Earth's "
        "orbit. Years divisible by 4 are leap years, except century years not divisible by 400.",
        "A year with 365 days.",
        "A leap year has 366 days; 365 is an ordinary year.",
    ),
    (
        LONGER_BETTER,
        'Translate "Good morning, how are you?" into French.',
        "Bonjour, comment allez-vous ?",
        "Bonjour.",
        "It translates the whole sentence; the other translates only the greeting.",
    ),
    (
        LONGER_BETTER,
        "What causes ocean tides?",
        "Mainly the Moon's gravity, with a smaller contribution from the Sun: it raises bulges of water on the sides "
        "of Earth facing and facing away from the Moon, and Earth rotates through them.",
        "The wind.",
        "Tides are driven by lunar and solar gravity, not by wind.",
    ),
    (
        LONGER_BETTER,
        "How many days are in a leap year, and which month gets the extra day?",
        "366 days; February gets the extra day, 29 February.",
        "366.",
        "Both parts of the question are answered; the other omits the month.",
    ),
    (
        LONGER_BETTER,
        "Write an SQL query that selects all rows from a table named users.",
        "SELECT * FROM users;",
        "GET users",
        "SELECT * FROM users is valid SQL; GET is not an SQL statement.",
    ),
    (
        LONGER_BETTER,
        "Describe photosynthesis in one sentence.",
        "Plants use light energy to turn carbon dioxide and water into glucose, releasing oxygen.",
        "Plants eating sunlight.",
        "It names the inputs and outputs accurately; the other is vague and misleading.",
    ),
    (
        LONGER_BETTER,
        "State the Pythagorean theorem.",
        "In a right-angled triangle, the square of the hypotenuse equals the sum of the squares of the other two "
        "sides: a² + b² = c².",
        "a + b = c.",
        "The theorem relates squares of the sides; a + b = c is wrong.",
    ),
]

PAIR_MODELS = [
    "gpt-4o-mini",
    "claude-3-haiku",
    "llama-3-8b-instruct",
    "mistral-7b-instruct",
    "gpt-3.5-turbo",
    "smollm2-1.7b-instruct",
    "smollm2-360m-instruct",
    "gpt-4o-mini",
    "claude-3-haiku",
    "llama-3-8b-instruct",
]


# -- helpers ------------------------------------------------------------------

_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_squad(text: str) -> str:
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(baseline: str, candidate: str) -> bool:
    target = normalize_squad(candidate)
    return any(normalize_squad(r.strip()) == target for r in baseline.split("|") if r.strip())


def default_label(style: str) -> str:
    if style in CORRECT_STYLES:
        return "yes"
    if style in WRONG_STYLES:
        return "no"
    raise ValueError(f"style {style!r} needs an explicit human label")


def build_qa() -> list[dict]:
    rows = []
    for prompt, refs, cands in QUESTIONS:
        for c in cands:
            human = c.human or default_label(c.style)
            rows.append(
                {
                    "prompt": prompt,
                    "baseline": refs,
                    "candidate": c.text,
                    "human": human,
                    "human_2": c.h2 or human,
                    "candidate_model": None,
                    "style": c.style,
                }
            )
    # Models: seeded round-robin within each style, so families get a similar mix.
    rng = random.Random(20240611)
    by_style: dict[str, list[dict]] = {}
    for r in rows:
        by_style.setdefault(r["style"], []).append(r)
    offset = 0
    for style in sorted(by_style):
        group = by_style[style][:]
        rng.shuffle(group)
        for i, r in enumerate(group):
            r["candidate_model"] = MODEL_SLOTS[(offset + i) % len(MODEL_SLOTS)]
        offset += len(group)
    out = []
    for i, r in enumerate(rows, 1):
        out.append({"id": f"qa-{i:03d}", **r})
    return out


def build_pairwise() -> list[dict]:
    rng = random.Random(7)
    # Balanced positions: within each category, half the pairs put the better answer in slot "a"
    # and half in "b" (odd-sized categories alternate the extra one), in a seeded random order.
    counts = Counter(cat for cat, *_ in PAIRS)
    slots: dict[str, list[str]] = {}
    extra = "a"
    for cat in sorted(counts):
        n = counts[cat]
        lst = ["a", "b"] * (n // 2)
        if n % 2:
            lst.append(extra)
            extra = "b" if extra == "a" else "a"
        rng.shuffle(lst)
        slots[cat] = lst
    rows = []
    for cat, prompt, better, worse, reason in PAIRS:
        better_slot = slots[cat].pop()
        m1, m2 = rng.sample(PAIR_MODELS, 2)
        while m1 == m2:
            m1, m2 = rng.sample(PAIR_MODELS, 2)
        a, b = (better, worse) if better_slot == "a" else (worse, better)
        rows.append(
            {
                "prompt": prompt,
                "answer_a": a,
                "answer_b": b,
                "better": better_slot,
                "reason": reason,
                "answer_a_model": m1,
                "answer_b_model": m2,
                "category": cat,
            }
        )
    return [{"id": f"pw-{i:03d}", **r} for i, r in enumerate(rows, 1)]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")


QA_KEYS = ("id", "prompt", "baseline", "candidate", "human", "human_2", "candidate_model", "style")
PW_KEYS = ("id", "prompt", "answer_a", "answer_b", "better", "reason", "answer_a_model", "answer_b_model", "category")


def family(model: str) -> str:
    return model.split("-")[0]


def check(qa: list[dict], pw: list[dict]) -> None:
    """Validate the written rows and print the summary figures quoted in README.md."""
    for rows, keys in ((qa, QA_KEYS), (pw, PW_KEYS)):
        assert len({r["id"] for r in rows}) == len(rows), "duplicate ids"
        for r in rows:
            assert all(isinstance(r.get(k), str) and r[k].strip() for k in keys), r["id"]
    assert all(r["human"] in ("yes", "no") and r["human_2"] in ("yes", "no") for r in qa)
    assert all(r["better"] in ("a", "b") and r["answer_a"] != r["answer_b"] for r in pw)
    n = len(qa)
    agree = sum(r["human"] == r["human_2"] for r in qa) / n
    p1 = sum(r["human"] == "yes" for r in qa) / n
    p2 = sum(r["human_2"] == "yes" for r in qa) / n
    pe = p1 * p2 + (1 - p1) * (1 - p2)
    kappa = (agree - pe) / (1 - pe)
    correct = [r for r in qa if r["human"] == "yes"]
    em_fail = sum(not exact_match(r["baseline"], r["candidate"]) for r in correct)
    em_agree = sum(exact_match(r["baseline"], r["candidate"]) == (r["human"] == "yes") for r in qa) / n
    print(f"qa_calibration.jsonl: {n} rows, {len({r['prompt'] for r in qa})} distinct prompts")
    print(f"  human: {dict(Counter(r['human'] for r in qa))}  human_2: {dict(Counter(r['human_2'] for r in qa))}")
    print(f"  human vs human_2: {agree:.1%} agreement, Cohen's kappa {kappa:.2f}")
    print(f"  correct rows failing SQuAD exact match: {em_fail}/{len(correct)} = {em_fail / len(correct):.1%}")
    print(f"  SQuAD exact match agrees with human on {em_agree:.1%} of rows")
    print(f"  candidates of 80+ words: {sum(len(r['candidate'].split()) >= 80 for r in qa)}")
    by_style = Counter((r["style"], r["human"]) for r in qa)
    print("  style: yes / no")
    for style in sorted({r["style"] for r in qa}, key=lambda s: -(by_style[(s, "yes")] + by_style[(s, "no")])):
        print(f"    {style:15s} {by_style[(style, 'yes')]:3d} / {by_style[(style, 'no')]:3d}")
    by_fam = Counter((family(r["candidate_model"]), r["human"]) for r in qa)
    print("  model family: yes / no")
    for fam in sorted({family(r["candidate_model"]) for r in qa}):
        print(f"    {fam:15s} {by_fam[(fam, 'yes')]:3d} / {by_fam[(fam, 'no')]:3d}")
    print(f"  models: {dict(Counter(r['candidate_model'] for r in qa).most_common())}")
    print(
        f"  human/human_2 disagreements by style: {dict(Counter(r['style'] for r in qa if r['human'] != r['human_2']))}"
    )
    print(f"pairwise.jsonl: {len(pw)} rows, better: {dict(Counter(r['better'] for r in pw))}")
    by_cat = Counter((r["category"], r["better"]) for r in pw)
    for cat in sorted({r["category"] for r in pw}):
        print(f"    {cat:17s} a={by_cat[(cat, 'a')]:2d} b={by_cat[(cat, 'b')]:2d}")

    def longer_is_better(r: dict) -> bool:
        other = "b" if r["better"] == "a" else "a"
        return len(r["answer_" + r["better"]]) > len(r["answer_" + other])

    print(f"  pairs whose better answer is the longer one: {sum(map(longer_is_better, pw))}")
    models = Counter(m for r in pw for m in (r["answer_a_model"], r["answer_b_model"]))
    print(f"  models: {dict(models.most_common())}")


def main() -> None:
    qa = build_qa()
    pw = build_pairwise()
    # sanity: every "short" row matches a reference exactly; correct non-short rows do not
    for r in qa:
        em = exact_match(r["baseline"], r["candidate"])
        if r["style"] == "short" and not em:
            raise SystemExit(f"{r['id']}: short answer fails exact match: {r['candidate']!r}")
        if r["style"] in CORRECT_STYLES - {"short"} and em:
            raise SystemExit(f"{r['id']}: {r['style']} answer unexpectedly matches exactly: {r['candidate']!r}")
    write_jsonl(HERE / "qa_calibration.jsonl", qa)
    write_jsonl(HERE / "pairwise.jsonl", pw)
    # re-read what was written and validate it
    read = [
        [json.loads(line) for line in (HERE / f).open(encoding="utf-8")]
        for f in ("qa_calibration.jsonl", "pairwise.jsonl")
    ]
    check(*read)


if __name__ == "__main__":
    main()
