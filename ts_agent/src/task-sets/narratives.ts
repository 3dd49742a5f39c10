/**
 * The case narratives of the AML task set, drawn from the task sets' seeded stream (task-rng.ts;
 * never Math.random), so aml-tasks.ts regenerates the checked-in file byte for byte.
 *
 * What is deliberate:
 * - Each narrative keeps its typology's key indicator (e.g. deposits just under the reporting
 *   threshold for structuring), so the mapping is learnable, but it also carries distractor
 *   sentences that mention features of other typologies in a benign context (a documented
 *   supplier wire, an employer that is a registered company), so one keyword is not enough.
 * - Narratives never contain their own label word.
 * - TEMPLATES (5 per typology) feed the train and test splits; HELDOUT_TEMPLATES (2 more per
 *   typology) only the "test_heldout_template" split.
 */
import type { TaskRng } from "./task-rng.js";

/** Narrative length bounds in words (whitespace-separated), inclusive. */
export const MIN_WORDS = 40;
export const MAX_WORDS = 90;

// ---------------------------------------------------------------------------------------------
// Slot values

// first names with the pronouns the narratives use for them
const FEMALE_NAMES = [
  "Maria",
  "Aisha",
  "Elena",
  "Priya",
  "Mei",
  "Sofia",
  "Grace",
  "Fatima",
  "Ingrid",
  "Yuki",
  "Leila",
  "Hannah",
  "Olga",
  "Nadia",
  "Chloe",
  "Anna",
];
const MALE_NAMES = ["James", "Daniel", "Omar", "Lucas", "Viktor", "Mateo", "Noah", "Kwame", "Rafael", "Tomas", "Arjun", "Samuel", "Diego", "Ibrahim"];
const LAST_NAMES = [
  "Alvarez",
  "Brennan",
  "Okafor",
  "Novak",
  "Haddad",
  "Lindqvist",
  "Moreau",
  "Petrov",
  "Tanaka",
  "Mensah",
  "Costa",
  "Weber",
  "Rahman",
  "Kowalski",
  "Duarte",
  "Fischer",
  "Nakamura",
  "Osei",
  "Romero",
  "Sato",
  "Keller",
  "Ortiz",
  "Banerjee",
  "Walsh",
];
const CITIES = [
  "Houston",
  "Miami",
  "Chicago",
  "Newark",
  "Phoenix",
  "Denver",
  "Atlanta",
  "Seattle",
  "Boston",
  "San Diego",
  "El Paso",
  "Detroit",
  "Tampa",
  "Dallas",
  "Charlotte",
  "Portland",
  "Tucson",
  "Laredo",
  "Memphis",
  "Columbus",
];
const BANKS = [
  "First Harbor Bank",
  "Granite Trust",
  "Northbridge Savings",
  "Meridian Bank",
  "Coastal Federal",
  "Pioneer Credit Union",
  "Summit National",
  "Riverside Bank",
  "Lakeshore Bank",
  "Union Square Bank",
];
const JURISDICTIONS = ["Cyprus", "Latvia", "Hong Kong", "the UAE", "Panama", "Malta", "Singapore", "Estonia", "Lithuania", "Turkey", "Georgia", "Luxembourg"];
const OFFSHORE = ["the British Virgin Islands", "Seychelles", "Belize", "Mauritius", "the Cayman Islands", "Panama", "Cyprus", "the Marshall Islands"];
const GOODS = [
  "used cars",
  "mobile phones",
  "textiles",
  "frozen seafood",
  "auto parts",
  "medical gloves",
  "scrap metal",
  "solar panels",
  "coffee beans",
  "laptops",
  "cosmetics",
  "machine tools",
];
const COMPANY_HEADS = [
  "Apex",
  "Bluewater",
  "Crescent",
  "Delta Star",
  "Evergreen",
  "Falcon",
  "Golden Bay",
  "Horizon",
  "Ironwood",
  "Juniper",
  "Keystone",
  "Lakeside",
  "Northwind",
  "Silverline",
  "Redstone",
  "Orion",
];
const COMPANY_TAILS = ["Trading", "Holdings", "Ventures", "Global", "Logistics", "Consulting", "Imports", "Partners"];
const COMPANY_FORMS = ["LLC", "Ltd", "Inc"];
const OCCUPATIONS = [
  "restaurant owner",
  "car dealer",
  "nurse",
  "taxi driver",
  "contractor",
  "jeweller",
  "retired teacher",
  "barber",
  "accountant",
  "shop manager",
];
const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
const PURPOSES = ["consulting fees", "loan repayment", "service charges", "investment", "software licences", "commission"];

interface Person {
  name: string;
  he: string;
  him: string;
  his: string;
}

const HE = { he: "he", him: "him", his: "his" };
const SHE = { he: "she", him: "her", his: "her" };

/** Slot values for one narrative; each template uses the ones it needs. */
export interface Slots {
  p: Person;
  p2: Person;
  city: string;
  city2: string;
  cities: string[];
  bank: string;
  bank2: string;
  co: string;
  co2: string;
  j: string[];
  off: string;
  goods: string;
  job: string;
  month: string;
  year: number;
  purpose: string;
}

function money(n: number): string {
  const digits = String(Math.round(n));
  return "$" + digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** Amount in [lo, hi] rounded to `step`, formatted as "$12,300". */
function amount(r: TaskRng, lo: number, hi: number, step: number): string {
  return money(Math.round(r.int(lo, hi) / step) * step);
}

function person(r: TaskRng): Person {
  const female = r.float() < 0.5;
  const first = r.pick(female ? FEMALE_NAMES : MALE_NAMES);
  return { name: `${first} ${r.pick(LAST_NAMES)}`, ...(female ? SHE : HE) };
}

function company(r: TaskRng): string {
  return `${r.pick(COMPANY_HEADS)} ${r.pick(COMPANY_TAILS)} ${r.pick(COMPANY_FORMS)}`;
}

export function drawSlots(r: TaskRng): Slots {
  const p = person(r);
  let p2 = person(r);
  while (p2.name === p.name) p2 = person(r);
  const cities = r.sample(CITIES, 5);
  const banks = r.sample(BANKS, 2);
  const co = company(r);
  let co2 = company(r);
  while (co2 === co) co2 = company(r);
  return {
    p,
    p2,
    city: cities[0],
    city2: cities[1],
    cities: cities.slice(2),
    bank: banks[0],
    bank2: banks[1],
    co,
    co2,
    j: r.sample(JURISDICTIONS, 3),
    off: r.pick(OFFSHORE),
    goods: r.pick(GOODS),
    job: r.pick(OCCUPATIONS),
    month: r.pick(MONTHS),
    year: r.int(2020, 2025),
    purpose: r.pick(PURPOSES),
  };
}

const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
/** "a" or "an" before a word, by its first letter (good enough for the slot values here). */
const an = (word: string) => (/^[aeiou]/i.test(word) ? `an ${word}` : `a ${word}`);

// ---------------------------------------------------------------------------------------------
// Narrative templates: the core sentences of each case, carrying the key indicator.

export type Template = (s: Slots, r: TaskRng) => string;

export const TEMPLATES: Record<string, Template[]> = {
  structuring: [
    (s, r) =>
      `${s.p.name} made ${r.int(6, 14)} cash deposits of between ${amount(r, 9000, 9300, 10)} and ${amount(r, 9600, 9950, 10)} into a personal checking account at ${s.bank} over ${r.int(5, 12)} consecutive days. Every deposit stayed just below the $10,000 currency reporting threshold, and ${s.p.he} made each one personally.`,
    (s, r) =>
      `Over ${r.int(4, 9)} days in ${s.month} ${s.year}, ${s.p.name} visited ${r.int(3, 6)} ${s.bank} branches in ${s.city} and deposited cash each time, in amounts such as ${amount(r, 9100, 9990, 10)} or ${amount(r, 8500, 9400, 10)}. When a teller mentioned the $10,000 report, ${s.p.he} asked how to keep deposits under the limit.`,
    (s, r) =>
      `A review of ${s.p.name}'s account at ${s.bank} found ${r.int(8, 20)} cash deposits in ${s.month}, each between ${amount(r, 8800, 9200, 50)} and ${amount(r, 9700, 9990, 10)}, never reaching $10,000. The same customer made every deposit, breaking one large sum into smaller amounts to avoid a currency transaction report.`,
    (s, r) =>
      `${s.p.name}, ${an(s.job)} in ${s.city}, received ${amount(r, 60000, 150000, 1000)} in cash from a private sale and deposited it in pieces: ${r.int(7, 16)} deposits of roughly ${amount(r, 9000, 9900, 100)}, spread over mornings and afternoons so that no single deposit triggered the $10,000 reporting requirement.`,
    (s, r) =>
      `Teller notes at ${s.bank} in ${s.city} describe ${s.p.name} returning again and again with cash in amounts just under $10,000. Over ${r.int(2, 5)} weeks ${s.p.he} made ${r.int(9, 18)} such deposits into ${s.p.his} own account, after withdrawing an earlier request to deposit ${amount(r, 40000, 90000, 1000)} at once.`,
  ],
  smurfing: [
    (s, r) =>
      `Within ${r.int(2, 6)} days, ${r.int(6, 15)} different people deposited cash of ${amount(r, 700, 1500, 50)} to ${amount(r, 2000, 4000, 50)} each into an account controlled by ${s.p.name} at ${s.bank} branches across ${s.city}. None of the depositors had any known relationship with ${s.p.name}, and several gave the same home address.`,
    (s, r) =>
      `Investigators found that ${s.p.name} recruited ${r.int(5, 12)} students and relatives to buy money orders and make small cash deposits on ${s.p.his} behalf, each far below reporting limits. The helpers handed their receipts back to ${s.p.name}, who gathered the funds in one account at ${s.bank}.`,
    (s, r) =>
      `A group of ${r.int(5, 11)} individuals visited ${s.bank} in ${s.city} on the same afternoon, each depositing between ${amount(r, 800, 1500, 50)} and ${amount(r, 2000, 3500, 50)} in cash into the account of ${s.co}. Security cameras showed them arriving together in one van driven by ${s.p.name}.`,
    (s, r) =>
      `${s.p.name}'s account at ${s.bank} received ${r.int(25, 60)} small cash deposits in ${s.month} ${s.year}, made by ${r.int(8, 16)} separate third-party depositors. Each person paid in a modest amount, together totalling ${amount(r, 40000, 95000, 500)}, which ${s.p.name} later moved out in one transfer.`,
    (s, r) =>
      `Several people, later identified as helpers paid by ${s.p.name}, split a cash hoard into small sums and deposited them at different ATMs and branches of ${s.bank}. Each of the ${r.int(6, 14)} helpers made deposits of about ${amount(r, 1000, 3000, 100)}, and all the money ended up with ${s.p.name}.`,
  ],
  layering: [
    (s, r) =>
      `Funds of ${amount(r, 150000, 900000, 1000)} arrived in the account of ${s.co} at ${s.bank} and were wired out within ${r.int(2, 20)} hours to an account in ${s.j[0]}, then onward to ${s.j[1]} and ${s.j[2]}. Each hop used a different bank, and the stated purpose changed at every step.`,
    (s, r) =>
      `${s.p.name} received ${amount(r, 100000, 600000, 1000)} from an unknown sender and, the same day, split it into ${r.int(3, 7)} international wire transfers to banks in ${s.j[0]} and ${s.j[1]}. Within a week the money had passed through ${r.int(6, 12)} accounts in several countries before landing in a brokerage account in ${s.j[2]}.`,
    (s, r) =>
      `Investigators traced a chain of rapid wire transfers starting at ${s.bank}: ${amount(r, 200000, 800000, 1000)} moved from ${s.p.name} to ${s.co} in ${s.j[0]}, to ${s.co2} in ${s.j[1]}, and then to a trust account in ${s.j[2]}, all within ${r.int(3, 9)} days and with no apparent business purpose.`,
    (s, r) =>
      `The account of ${s.co} shows incoming wires that are immediately wired out again in similar amounts to different jurisdictions, including ${s.j[0]} and ${s.j[1]}. During ${s.month}, about ${amount(r, 1000000, 5000000, 10000)} passed through the account in ${r.int(20, 60)} transfers, obscuring the original source of the funds.`,
    (s, r) =>
      `A correspondent banking review at ${s.bank} flagged ${s.p.name}'s account: large wires from ${s.j[0]} were converted between currencies and wired on to ${s.j[1]} and ${s.j[2]} within hours, again and again, each time labelled "${s.purpose}", putting several transfers between the money and its origin.`,
  ],
  trade_based: [
    (s, r) =>
      `${s.co} imported a shipment of ${s.goods} from ${s.j[0]} with an invoice of ${amount(r, 300000, 900000, 1000)}, about ${r.int(3, 8)} times the market price for comparable goods. Customs data show an ordinary quantity shipped, and the inflated invoice was paid in full by wire to the exporter.`,
    (s, r) =>
      `${s.co} exported ${s.goods} to a related buyer in ${s.j[0]} at invoice prices roughly ${r.int(50, 80)} percent below market value. The buyer resold the goods at full price, and the difference stayed abroad in an account controlled by ${s.p.name}.`,
    (s, r) =>
      `Shipping records for ${s.co} list containers of ${s.goods} from ${s.j[0]} whose declared weight did not match the invoices, and an inspection found cheap substitutes inside. The invoices, worth ${amount(r, 200000, 700000, 1000)}, were still paid in full through a letter of credit at ${s.bank}.`,
    (s, r) =>
      `An analyst compared invoices from ${s.co} for ${s.goods} with customs declarations: the invoices overstated the quantity shipped by ${r.int(40, 300)} percent, and the buyer in ${s.j[0]} paid ${amount(r, 150000, 600000, 1000)} for goods that were never delivered.`,
    (s, r) =>
      `${s.p.name}, director of ${s.co}, invoiced the same shipment of ${s.goods} twice, once through ${s.bank} and once through ${s.bank2}, and received payment for both from an importer in ${s.j[0]}. The goods were also described on the invoices as higher-grade than what was shipped.`,
  ],
  shell_company: [
    (s, r) =>
      `${s.co}, registered in ${s.off} ${r.int(3, 14)} months ago, has no employees, no website and no physical office; its address belongs to a registered agent shared with hundreds of firms. Its account at ${s.bank} nevertheless received ${amount(r, 200000, 900000, 1000)}, and a nominee director signs everything for an undisclosed owner.`,
    (s, r) =>
      `Corporate registry checks on ${s.co} show a nominee director, a mail-drop address in ${s.city}, no tax filings and no trade activity. The company's account received ${amount(r, 100000, 500000, 1000)} described as "${s.purpose}" and paid it out to ${s.p.name}, who is believed to be its real beneficial owner.`,
    (s, r) =>
      `A due-diligence visit to the listed office of ${s.co} in ${s.city} found an empty co-working desk. The firm reports ${amount(r, 1000000, 4000000, 10000)} in annual revenue but has no staff and no inventory, and its director also sits on the boards of ${r.int(12, 60)} other dormant companies.`,
    (s, r) =>
      `${s.co} was set up by a formation agent in ${s.off} with bearer shares and a nominee shareholder. It has no operations of any kind; its only activity is receiving payments from ${s.p.name}'s other businesses and holding them in an account at ${s.bank}, hiding who owns the money.`,
    (s, r) =>
      `${s.p.name} used ${s.co}, a company with no employees, no products and no premises, to receive ${amount(r, 150000, 700000, 1000)} in ${s.month}. The company's only officer is a nominee paid ${amount(r, 500, 3000, 100)} a year to sign documents, and ${s.p.name}'s name appears nowhere in its records.`,
  ],
  funnel_account: [
    (s, r) =>
      `${s.p.name}'s account, opened in ${s.city}, received cash deposits at ${s.bank} branches in ${r.int(4, 8)} different states during ${s.month}, totalling ${amount(r, 80000, 300000, 1000)}. Almost every deposit was followed within a day by withdrawals in ${s.city2}, leaving a near-zero balance.`,
    (s, r) =>
      `Cash was paid into a single account at ${s.bank} from branches in ${s.cities[0]}, ${s.cities[1]} and ${s.cities[2]}, hundreds of miles apart. The account holder, ${s.p.name}, lives in ${s.city}, near the border, where the funds were withdrawn in cash within hours of each deposit.`,
    (s, r) =>
      `An account held by ${s.co} in ${s.city} receives deposits at ATMs and branches in ${r.int(5, 12)} cities far from where the business operates. The balance is emptied each week by withdrawals and checks drawn in ${s.city2}, and the owner could not explain why distant customers pay in cash.`,
    (s, r) =>
      `Over ${r.int(3, 8)} weeks, out-of-state cash deposits into ${s.p.name}'s account at ${s.bank} were made in ${s.cities[0]}, ${s.cities[1]}, ${s.cities[2]} and ${s.city2}, while every debit occurred in ${s.city}. Money came in across the country and left from that single location within hours.`,
    (s, r) =>
      `${s.bank} noticed that ${s.p.name}'s account gets cash deposits almost daily in branches across ${r.int(4, 9)} states, ${amount(r, 3000, 20000, 100)} at a time, yet the money is always taken out soon after in ${s.city}. The geographic spread of deposits has no link to ${s.p.his} work as ${an(s.job)}.`,
  ],
  money_mule: [
    (s, r) =>
      `${s.p.name}, a ${r.int(19, 24)}-year-old student, answered an online job advert for a "payment processing assistant". ${cap(s.p.he)} received ${r.int(4, 12)} transfers from strangers into ${s.p.his} personal account at ${s.bank}, kept a ${r.int(5, 15)} percent commission, and forwarded the rest to ${s.j[0]} as instructed.`,
    (s, r) =>
      `After meeting someone on a dating app, ${s.p.name} agreed to let funds pass through ${s.p.his} account at ${s.bank}. Payments from ${r.int(3, 9)} unknown senders, later confirmed as fraud victims, arrived and ${s.p.he} sent the money on through gift cards and cryptocurrency within hours, as ${s.p.his} new partner asked.`,
    (s, r) =>
      `${s.p.name}'s account at ${s.bank}, previously used only for a small salary, received ${amount(r, 20000, 90000, 500)} from ${r.int(4, 10)} unrelated individuals in ${s.month}. ${cap(s.p.he)} told the bank a "work-from-home employer" asked ${s.p.him} to move the money onward and keep a fee.`,
    (s, r) =>
      `Victims of an online shopping scam sent payments to ${s.p.name}'s account. ${s.p.name} had been recruited through social media, was promised ${amount(r, 200, 800, 50)} per transfer, and moved each payment to an overseas account in ${s.j[0]} the same day, without knowing who controlled it.`,
    (s, r) =>
      `The bank received fraud recalls for ${r.int(3, 8)} transfers into ${s.p.name}'s account. Interviewed, ${s.p.name} admitted a contact met through a gaming forum had paid ${s.p.him} ${amount(r, 300, 1500, 50)} to receive other people's money and pass it on to accounts ${s.p.he} was given.`,
  ],
  round_tripping: [
    (s, r) =>
      `${s.p.name} transferred ${amount(r, 500000, 3000000, 10000)} from ${s.co} to an offshore company in ${s.off} that ${s.p.he} secretly owns. Months later the same money came back to ${s.co} recorded as foreign direct investment, qualifying for a tax incentive for foreign investors.`,
    (s, r) =>
      `${s.co} paid ${amount(r, 300000, 2000000, 10000)} to a consulting firm in ${s.off} for vague services. That firm, controlled by ${s.p.name}, who also owns ${s.co}, then lent the same amount back to ${s.co} as a loan whose interest payments were deducted from taxes.`,
    (s, r) =>
      `Funds left ${s.p.name}'s domestic account for a trust in ${s.off} and returned within ${r.int(3, 10)} weeks as the purchase price of new shares in ${s.p.his} own business, ${s.co}, making undeclared income look like outside investment.`,
    (s, r) =>
      `An audit of ${s.co} found that its largest foreign investor, registered in ${s.off}, was funded entirely by earlier payments from ${s.co} itself. About ${amount(r, 400000, 2500000, 10000)} had left the country and come back to the same owners disguised as capital.`,
    (s, r) =>
      `${s.p.name} routed ${amount(r, 200000, 1500000, 10000)} of undeclared business income to a bank account in ${s.off}, then brought it home as a loan from an offshore entity ${s.p.he} controls, repaying ${s.p.him}self with tax-deductible interest.`,
  ],
};

// Held-out templates: new wordings of each typology's indicator that NO train or test row uses.
// Rows from them form the split "test_heldout_template", so an eval can tell a model that learned
// the mapping from one that memorised the 40 training templates (the "test" split shares all of
// its templates with "train": its delta is in-distribution only).
export const HELDOUT_TEMPLATES: Record<string, Template[]> = {
  structuring: [
    (s, r) =>
      `Compliance staff at ${s.bank} noticed that ${s.p.name} never deposits a round $10,000: across ${r.int(6, 12)} visits in ${s.month} the cash amounts were ${amount(r, 9200, 9500, 10)}, ${amount(r, 9500, 9800, 10)} and similar, always a little under the threshold that triggers a currency transaction report, and always paid in by ${s.p.him} alone.`,
    (s, r) =>
      `${s.p.name} sold a boat for ${amount(r, 50000, 120000, 1000)} in cash and, rather than paying it in at once, spread it over ${r.int(8, 14)} separate deposits of just under $10,000 each at ${s.bank} in ${s.city}, telling a teller ${s.p.he} wanted to avoid the paperwork a larger deposit would bring.`,
  ],
  smurfing: [
    (s, r) =>
      `Over one weekend, ${r.int(7, 14)} unrelated customers walked into ${s.bank} branches around ${s.city} and each paid between ${amount(r, 600, 1200, 50)} and ${amount(r, 1500, 3000, 50)} in cash into the same account, held by ${s.p.name}. Several later admitted ${s.p.name} had handed them the cash and a small fee for the errand.`,
    (s, r) =>
      `Money orders bought by ${r.int(6, 12)} different people at post offices in ${s.city}, each for a few hundred dollars, were all endorsed to ${s.p.name} and paid into ${s.p.his} account at ${s.bank}. The buyers said an acquaintance had paid them to make the purchases in their own names.`,
  ],
  layering: [
    (s, r) =>
      `Within ${r.int(24, 72)} hours of arriving, ${amount(r, 300000, 1200000, 1000)} credited to ${s.co} was split, converted into euros and dollars, and bounced through accounts in ${s.j[0]}, ${s.j[1]} and ${s.j[2]}, each hop at a different bank with a new payment reference, until the trail back to the first sender was hard to follow.`,
    (s, r) =>
      `${s.p.name} moved ${amount(r, 150000, 700000, 1000)} from an account at ${s.bank} to a fintech wallet, then to a brokerage in ${s.j[0]}, then back out as wires to two companies in ${s.j[1]}, all within ${r.int(2, 6)} days, each transfer adding distance between the funds and where they came from.`,
  ],
  trade_based: [
    (s, r) =>
      `Port records show ${s.co} paid ${amount(r, 400000, 1000000, 1000)} for a container described as premium ${s.goods}; the container actually held low-value stock worth a fraction of that, so the overpayment carried money to the seller in ${s.j[0]} under cover of an ordinary import.`,
    (s, r) =>
      `${s.co} sells ${s.goods} to a buyer in ${s.j[0]} owned by the same family, invoicing each shipment at about ${r.int(20, 45)} percent of what identical goods fetch on the market, while the buyer pays the balance of the true value into a private account abroad.`,
  ],
  shell_company: [
    (s, r) =>
      `${s.co} exists on paper only: incorporated in ${s.off} through an agent, it lists a nominee director, shares an address with ${r.int(200, 900)} other firms, and has never hired anyone or sold anything, yet its account at ${s.bank} has received ${amount(r, 300000, 1500000, 1000)} for ${s.p.name}, the owner hidden behind the nominee.`,
    (s, r) =>
      `Investigators found that ${s.co}, which pays ${s.p.name}'s bills, has no office, no employees, no website and no revenue from trade; its only officer is a nominee who signs for a fee of ${amount(r, 500, 2500, 100)}, and its bank account simply holds money for an owner who appears in no record.`,
  ],
  funnel_account: [
    (s, r) =>
      `Cash deposits into ${s.p.name}'s account at ${s.bank} came from branches in ${s.cities[0]}, ${s.cities[1]} and ${s.cities[2]}, far from each other and from ${s.p.his} home, about ${amount(r, 4000, 15000, 100)} at a time, and each was pulled out again within a day at ATMs in ${s.city}.`,
    (s, r) =>
      `For ${r.int(4, 10)} weeks, an account opened by ${s.p.name} in ${s.city} was fed cash in ${r.int(5, 11)} different states, then drained in ${s.city2} by cash withdrawals soon after each deposit, so the balance never stayed above a few hundred dollars.`,
  ],
  money_mule: [
    (s, r) =>
      `${s.p.name}, ${r.int(18, 23)}, was offered ${amount(r, 100, 600, 50)} a week on a messaging app to "receive customer refunds". Payments from ${r.int(3, 8)} strangers, later reported as scam victims, reached ${s.p.his} account at ${s.bank}, and ${s.p.he} passed each one on to an account ${s.p.he} was told to use.`,
    (s, r) =>
      `A retired ${s.job} in ${s.city}, ${s.p.name}, agreed to help an online friend by letting money pass through ${s.p.his} account. Over ${s.month}, ${r.int(4, 9)} incoming transfers from people ${s.p.he} had never met were sent on the same day to ${s.j[0]}, less a small amount ${s.p.he} was allowed to keep.`,
  ],
  round_tripping: [
    (s, r) =>
      `${s.co} wired ${amount(r, 400000, 2500000, 10000)} to a company in ${s.off} that ${s.p.name}, its owner, controls through a nominee; the same sum came back to ${s.co} ${r.int(2, 8)} months later booked as a foreign investor's equity stake, disguising the owner's own money as outside capital.`,
    (s, r) =>
      `Profits that ${s.p.name} kept off ${s.co}'s books were sent to an account in ${s.off} and returned as a loan from an offshore lender, which is in fact ${s.p.his} own entity, so the money came home clean and its interest reduced ${s.co}'s taxes.`,
  ],
};

// Benign sentences that mention features of other typologies (wires, invoices, companies, cash,
// several people, other cities) or plain noise. None of them carries a typology's indicator.
const DISTRACTORS: Template[] = [
  (s, r) => `The customer has banked with ${s.bank} since ${s.year - r.int(3, 15)} and had no earlier alerts.`,
  (s) => `A routine international wire to a relative in ${s.j[2]} in ${s.month} matched the customer's stated profile.`,
  (s) => `A supplier invoice paid by wire last year was checked against delivery papers and found to be in order.`,
  (s) => `The customer's employer, a registered company in ${s.city2}, files audited accounts every year.`,
  (s, r) => `One cash withdrawal of ${amount(r, 2000, 8000, 100)} was explained by a documented used-car purchase.`,
  () => `Card spending on groceries, fuel and utilities looks ordinary.`,
  () => `The relationship manager describes the customer as polite and cooperative.`,
  () => `Identity documents were verified in person when the account was opened.`,
  (s) => `A branch visit in ${s.city2} in ${s.month} was only to update a mailing address.`,
  () => `The file also shows a few small payments to friends through a mobile app.`,
  (s) => `A family member occasionally deposits small gifts, and a joint savings account at ${s.bank2} is dormant.`,
  (s, r) => `A mortgage application in ${s.year - r.int(1, 4)} was approved after normal checks.`,
  () => `No adverse media was found, and sanctions screening returned no matches.`,
  (s) => `Last year a small import of ${s.goods} was declared correctly at customs and taxed normally.`,
  (s) => `An earlier review in ${s.year - 1} of a business trip abroad found nothing unusual.`,
  () => `The customer holds a small brokerage account that trades index funds a few times a year.`,
];

function wordCount(text: string): number {
  return text.trim().split(/\s+/).length;
}

/**
 * Core sentences plus distractors placed before and/or after them, within the word bounds.
 * Distractors are drawn without replacement; one that would push the narrative past MAX_WORDS is
 * skipped, and more than the drawn 1-2 are added only while the narrative is under MIN_WORDS.
 */
export function composeNarrative(core: string, s: Slots, r: TaskRng): string {
  const want = r.int(1, 2);
  const pool = r.shuffle(DISTRACTORS);
  const before: string[] = [];
  const after: string[] = [];
  let words = wordCount(core);
  let added = 0;
  for (const d of pool) {
    const sentence = d(s, r);
    const w = wordCount(sentence);
    if (words + w > MAX_WORDS) continue;
    if (added >= want && words >= MIN_WORDS) break;
    (r.float() < 0.35 ? before : after).push(sentence);
    words += w;
    added++;
  }
  const text = [...before, core, ...after].join(" ");
  const n = wordCount(text);
  if (n < MIN_WORDS || n > MAX_WORDS) throw new Error(`narrative has ${n} words: ${text}`);
  return text;
}
